//! The decode/normalize stage for GitHub: a verified delivery's bytes into one [`Event`].
//!
//! Owns the content-type handling ([`payload_bytes`]: JSON or the form field `payload`) and the
//! mapping from `X-GitHub-Event` + `action` to [`EventKind`]. It runs after `verify::github` and
//! decides nothing about triggering: bots, mentions and permissions are the trigger stage's job.
//! Routing reads the body once in the common case: an event name that can route is parsed straight
//! into its typed [`payload`] shape, which carries `action`; only when that fails is the lenient
//! envelope read, to tell a malformed routed delivery (refused) from an unrouted action of another
//! shape (accepted). So `ping`, installation events, unknown event names and new actions become
//! [`EventKind::Unrouted`] whatever else they carry. Choices: the repository owner falls back
//! to the `full_name` prefix; `issues.assigned` without an `assignee` is malformed, since the change
//! cannot be stated; `edited` deliveries without `changes.body` keep `previous_body: None`.

pub mod payload;

#[cfg(test)]
mod tests;

use std::borrow::Cow;

use crate::event::{
    Actor, ActorKind, AssignmentChange, AssignmentEvent, Comment, CommentAction, CommentEvent, Event, EventKind,
    GithubSubject, Membership, Placement, Subject, Tracker, Unrouted,
};
use crate::ingest::decode::{from_json, DecodeError};

/// The form field that carries the JSON document in `application/x-www-form-urlencoded` deliveries.
const FORM_PAYLOAD_FIELD: &str = "payload";

/// Extracts the JSON document from a verified request body according to its `Content-Type`.
///
/// `application/json` (any parameters, such as `; charset=utf-8`) returns `body` unchanged;
/// `application/x-www-form-urlencoded` returns the url-decoded `payload` field (the first one, if
/// repeated). Media types compare case-insensitively. Call this *after* verifying the signature,
/// which covers the raw bytes as sent.
///
/// # Errors
/// [`DecodeError::UnsupportedMediaType`] for a missing or other content type;
/// [`DecodeError::Malformed`] for a form body without a `payload` field.
pub fn payload_bytes<'b>(content_type: Option<&str>, body: &'b [u8]) -> Result<Cow<'b, [u8]>, DecodeError> {
    let media_type = content_type.map(|value| value.split(';').next().unwrap_or_default().trim());
    match media_type {
        Some(m) if m.eq_ignore_ascii_case("application/json") => Ok(Cow::Borrowed(body)),
        Some(m) if m.eq_ignore_ascii_case("application/x-www-form-urlencoded") => form_urlencoded::parse(body)
            .find(|(key, _)| key == FORM_PAYLOAD_FIELD)
            .map(|(_, value)| Cow::Owned(value.into_owned().into_bytes()))
            .ok_or_else(|| DecodeError::missing("form field `payload`")),
        Some(_) | None => Err(DecodeError::unsupported(media_type)),
    }
}

/// Decodes one verified GitHub delivery into the normalized [`Event`].
///
/// `event_name` is the `X-GitHub-Event` header, `delivery_id` the `X-GitHub-Delivery` header, and
/// `json` the document from [`payload_bytes`]. Routed: `issue_comment` and
/// `pull_request_review_comment` (`created`, `edited`, `deleted`) and `issues` (`assigned`,
/// `unassigned`). Everything else that is a JSON object decodes to [`EventKind::Unrouted`].
/// Pure: the same inputs give the same event.
///
/// # Errors
/// [`DecodeError::Malformed`] when `json` is not a JSON object, or a routed event lacks a field it
/// needs or has one of the wrong type; the detail names the field path.
pub fn decode(event_name: &str, delivery_id: &str, json: &[u8]) -> Result<Event, DecodeError> {
    let unrouted = |action| EventKind::Unrouted(Unrouted { event: event_name.to_owned(), action });
    let kind = match event_name {
        "issue_comment" => match typed::<payload::IssueCommentPayload>(event_name, json, |p| p.action.as_deref())? {
            Typed::Routed(Route::IssueComment(verb), p) => issue_comment(verb, p)?,
            Typed::Routed(_, p) => unrouted(p.action),
            Typed::Unrouted(action) => unrouted(action),
        },
        "pull_request_review_comment" => {
            match typed::<payload::ReviewCommentPayload>(event_name, json, |p| p.action.as_deref())? {
                Typed::Routed(Route::ReviewComment(verb), p) => review_comment(verb, p)?,
                Typed::Routed(_, p) => unrouted(p.action),
                Typed::Unrouted(action) => unrouted(action),
            }
        }
        "issues" => match typed::<payload::IssuesPayload>(event_name, json, |p| p.action.as_deref())? {
            Typed::Routed(Route::Assignment(verb), p) => assignment(verb, p)?,
            Typed::Routed(_, p) => unrouted(p.action),
            Typed::Unrouted(action) => unrouted(action),
        },
        _ => unrouted(from_json::<payload::Envelope>(json)?.action),
    };
    Ok(Event { delivery_id: delivery_id.to_owned(), tracker: Tracker::Github, kind })
}

/// A routable event name's body, read for [`decode`].
enum Typed<P> {
    /// The typed payload parsed, with the route its action gives (`Route::Unrouted` included).
    Routed(Route, P),
    /// The typed payload did not parse, and the action (from the envelope) does not route.
    Unrouted(Option<String>),
}

/// Parses `json` as `P`; when that fails, reads the envelope: a routed action keeps the typed
/// error (the delivery is malformed), any other action is unrouted whatever its shape.
fn typed<P: serde::de::DeserializeOwned>(
    event_name: &str,
    json: &[u8],
    action: impl Fn(&P) -> Option<&str>,
) -> Result<Typed<P>, DecodeError> {
    match from_json::<P>(json) {
        Ok(p) => Ok(Typed::Routed(Route::of(event_name, action(&p).unwrap_or_default()), p)),
        Err(typed_error) => {
            let envelope: payload::Envelope = from_json(json)?;
            match Route::of(event_name, envelope.action.as_deref().unwrap_or_default()) {
                Route::Unrouted => Ok(Typed::Unrouted(envelope.action)),
                Route::IssueComment(_) | Route::ReviewComment(_) | Route::Assignment(_) => Err(typed_error),
            }
        }
    }
}

/// Which decoder an (event, action) pair goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    IssueComment(CommentVerb),
    ReviewComment(CommentVerb),
    Assignment(AssignVerb),
    Unrouted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CommentVerb {
    Created,
    Edited,
    Deleted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AssignVerb {
    Assigned,
    Unassigned,
}

impl Route {
    fn of(event_name: &str, action: &str) -> Route {
        let comment_verb = match action {
            "created" => Some(CommentVerb::Created),
            "edited" => Some(CommentVerb::Edited),
            "deleted" => Some(CommentVerb::Deleted),
            _ => None,
        };
        let assign_verb = match action {
            "assigned" => Some(AssignVerb::Assigned),
            "unassigned" => Some(AssignVerb::Unassigned),
            _ => None,
        };
        match (event_name, comment_verb, assign_verb) {
            ("issue_comment", Some(verb), _) => Route::IssueComment(verb),
            ("pull_request_review_comment", Some(verb), _) => Route::ReviewComment(verb),
            ("issues", _, Some(verb)) => Route::Assignment(verb),
            _ => Route::Unrouted,
        }
    }
}

fn issue_comment(verb: CommentVerb, p: payload::IssueCommentPayload) -> Result<EventKind, DecodeError> {
    let assignees = p.issue.assignees.map(logins);
    let subject = subject(p.repository, p.installation, p.issue.number, p.issue.pull_request.is_some(), p.issue.title)?;
    let via_app_id = p.comment.performed_via_github_app.map(|app| app.id);
    let comment = Comment {
        id: p.comment.id.to_string(),
        body: p.comment.body,
        author: actor(p.comment.user, via_app_id),
        membership: membership(p.comment.author_association),
        placement: Placement::TopLevel,
        url: p.comment.html_url,
    };
    Ok(EventKind::Comment(CommentEvent { action: comment_action(verb, p.changes), subject, comment, assignees }))
}

fn review_comment(verb: CommentVerb, p: payload::ReviewCommentPayload) -> Result<EventKind, DecodeError> {
    let assignees = p.pull_request.assignees.map(logins);
    let subject = subject(p.repository, p.installation, p.pull_request.number, true, p.pull_request.title)?;
    let root_id = p.comment.in_reply_to_id.unwrap_or(p.comment.id);
    let via_app_id = p.comment.performed_via_github_app.map(|app| app.id);
    let comment = Comment {
        id: p.comment.id.to_string(),
        body: p.comment.body,
        author: actor(p.comment.user, via_app_id),
        membership: membership(p.comment.author_association),
        placement: Placement::ReviewThread { root_id: root_id.to_string() },
        url: p.comment.html_url,
    };
    Ok(EventKind::Comment(CommentEvent { action: comment_action(verb, p.changes), subject, comment, assignees }))
}

fn assignment(verb: AssignVerb, p: payload::IssuesPayload) -> Result<EventKind, DecodeError> {
    let login = p.assignee.map(|user| user.login).ok_or_else(|| DecodeError::missing("assignee"))?;
    let change = match verb {
        AssignVerb::Assigned => AssignmentChange::Assigned { login },
        AssignVerb::Unassigned => AssignmentChange::Unassigned { login },
    };
    let description = p.issue.body;
    let subject = subject(p.repository, p.installation, p.issue.number, p.issue.pull_request.is_some(), p.issue.title)?;
    Ok(EventKind::Assignment(AssignmentEvent { subject, actor: actor(p.sender, None), change, description }))
}

fn comment_action(verb: CommentVerb, changes: Option<payload::Changes>) -> CommentAction {
    match verb {
        CommentVerb::Created => CommentAction::Created,
        CommentVerb::Edited => {
            CommentAction::Edited { previous_body: changes.and_then(|c| c.body).map(|body| body.from) }
        }
        CommentVerb::Deleted => CommentAction::Deleted,
    }
}

fn subject(
    repository: payload::Repository,
    installation: Option<payload::Installation>,
    number: u64,
    is_pull_request: bool,
    title: Option<String>,
) -> Result<Subject, DecodeError> {
    let (full_owner, full_repo) = match repository.full_name.split_once('/') {
        Some((owner, repo)) => (Some(owner), Some(repo)),
        None => (None, None),
    };
    let owner = repository
        .owner
        .and_then(|o| o.login)
        .or_else(|| full_owner.map(str::to_owned))
        .ok_or_else(|| DecodeError::missing("repository.owner.login"))?;
    let repo = repository
        .name
        .or_else(|| full_repo.map(str::to_owned))
        .ok_or_else(|| DecodeError::missing("repository.name"))?;
    Ok(Subject::Github(GithubSubject {
        owner,
        repo,
        repository_id: repository.id,
        number,
        is_pull_request,
        title,
        installation_id: installation.map(|i| i.id),
    }))
}

fn actor(user: payload::User, via_app_id: Option<u64>) -> Actor {
    let kind = if user.kind.as_deref() == Some("Bot") { ActorKind::Bot } else { ActorKind::Human };
    Actor { id: user.id.to_string(), name: user.login, kind, via_app_id }
}

fn membership(author_association: Option<String>) -> Membership {
    match author_association {
        None => Membership::Unknown,
        Some(raw) => match raw.as_str() {
            "OWNER" => Membership::Owner,
            "MEMBER" => Membership::Member,
            "COLLABORATOR" => Membership::Collaborator,
            _ => Membership::Other(raw),
        },
    }
}

fn logins(users: Vec<payload::User>) -> Vec<String> {
    users.into_iter().map(|user| user.login).collect()
}
