//! The decode/normalize stage for Linear: a verified delivery's JSON into one [`Event`], plus the
//! signed `webhookTimestamp` that the ingest stage checks with `verify::linear_timestamp`.
//!
//! Routed: `Comment` create/update/remove on an issue, `Issue` updates that change the delegate or
//! assignee (detected by the *key* in `updatedFrom`), and every `AgentSessionEvent` action. All other
//! deliveries are [`EventKind::Unrouted`], including comments without an issue (project updates,
//! documents) and agent sessions without one. Trigger decisions are not made here.
//! Choices: a comment's author id falls back from `user` to `userId`, the external user, then the
//! bot actor; a missing body is empty; `updatedFrom.body: null` is an edit from an empty body; an
//! `Issue` change with no envelope `actor` (automation) is attributed to an unnamed bot.

pub mod payload;

#[cfg(test)]
mod tests;

use serde_json::{Map, Number, Value};

use crate::clock::Millis;
use crate::event::{
    Actor, ActorKind, AgentSessionEvent, AssignmentChange, AssignmentEvent, Comment, CommentAction, CommentEvent,
    Event, EventKind, LinearSubject, Membership, Placement, Subject, Tracker, Unrouted,
};
use crate::ingest::decode::{from_json, DecodeError};

/// A decoded Linear delivery and the replay-window input that came with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinearDecoded {
    /// The normalized event.
    pub event: Event,
    /// The body's `webhookTimestamp` (epoch ms, fractions dropped); `None` when absent, which the
    /// window check refuses.
    pub webhook_timestamp: Option<Millis>,
}

/// Decodes one verified Linear delivery. `delivery_id` is the `Linear-Delivery` header value.
///
/// Pure: the same inputs give the same result. The timestamp is returned for every delivery,
/// routed or not, so the replay window applies to all of them.
///
/// # Errors
/// [`DecodeError::Malformed`] when `json` is not a JSON object with a string `type`, or a routed
/// event lacks a field it needs or has one of the wrong type; the detail names the field path.
pub fn decode(delivery_id: &str, json: &[u8]) -> Result<LinearDecoded, DecodeError> {
    let envelope: payload::Envelope = from_json(json)?;
    let webhook_timestamp = envelope.webhook_timestamp.as_ref().map(millis);
    let unrouted = || EventKind::Unrouted(Unrouted { event: envelope.kind.clone(), action: envelope.action.clone() });
    let kind = match Route::of(&envelope.kind, envelope.action.as_deref()) {
        Route::Comment(verb) => comment(verb, from_json(json)?)?,
        Route::IssueUpdate => issue_update(from_json(json)?)?,
        Route::AgentSession(action) => agent_session(action, from_json(json)?),
        Route::Unrouted => None,
    }
    .unwrap_or_else(unrouted);
    Ok(LinearDecoded {
        event: Event { delivery_id: delivery_id.to_owned(), tracker: Tracker::Linear, kind },
        webhook_timestamp,
    })
}

/// Which decoder a (type, action) pair goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route<'a> {
    Comment(CommentVerb),
    IssueUpdate,
    AgentSession(&'a str),
    Unrouted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CommentVerb {
    Create,
    Update,
    Remove,
}

impl<'a> Route<'a> {
    fn of(kind: &str, action: Option<&'a str>) -> Route<'a> {
        match (kind, action) {
            ("Comment", Some("create")) => Route::Comment(CommentVerb::Create),
            ("Comment", Some("update")) => Route::Comment(CommentVerb::Update),
            ("Comment", Some("remove")) => Route::Comment(CommentVerb::Remove),
            ("Issue", Some("update")) => Route::IssueUpdate,
            ("AgentSessionEvent", Some(action)) => Route::AgentSession(action),
            _ => Route::Unrouted,
        }
    }
}

/// Epoch ms from an integer or float JSON number; floats lose their fraction, and out-of-range
/// values saturate (an absurd timestamp then simply fails the window check).
fn millis(n: &Number) -> Millis {
    // `as` from f64 saturates, and JSON has no NaN or infinity.
    Millis(n.as_i64().unwrap_or_else(|| n.as_f64().map_or(i64::MAX, |f| f as i64)))
}

/// `None` means "unrouted": the comment is not on an issue.
fn comment(verb: CommentVerb, p: payload::CommentPayload) -> Result<Option<EventKind>, DecodeError> {
    let data = p.data;
    let issue = data.issue;
    let Some(issue_id) = data.issue_id.or_else(|| issue.as_ref().and_then(|i| i.id.clone())) else {
        return Ok(None);
    };
    let (identifier, title) = issue.map_or((None, None), |i| (i.identifier, i.title));
    let subject = Subject::Linear(LinearSubject { organization_id: p.organization_id, issue_id, identifier, title });
    let action = match verb {
        CommentVerb::Create => CommentAction::Created,
        CommentVerb::Update => CommentAction::Edited { previous_body: previous_body(p.updated_from.as_ref())? },
        CommentVerb::Remove => CommentAction::Deleted,
    };
    let author = comment_author(data.user, data.user_id, data.external_user, data.external_user_id, data.bot_actor)?;
    let membership = match author.kind {
        ActorKind::Human => Membership::WorkspaceMember,
        ActorKind::Bot | ActorKind::External => Membership::Unknown,
    };
    let placement = match data.parent_id {
        Some(root_id) => Placement::Reply { root_id },
        None => Placement::TopLevel,
    };
    let comment = Comment {
        id: data.id,
        body: data.body.unwrap_or_default(),
        author,
        membership,
        placement,
        url: data.url.or(p.url),
    };
    Ok(Some(EventKind::Comment(CommentEvent { action, subject, comment, assignees: None })))
}

/// `updatedFrom.body` when the key exists: the body before the edit (`null` meaning it was empty).
fn previous_body(updated_from: Option<&Map<String, Value>>) -> Result<Option<String>, DecodeError> {
    match updated_from.and_then(|map| map.get("body")) {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(String::new())),
        Some(value) => optional_text(value, "updatedFrom.body"),
    }
}

/// A comment's author. Linear sends `user` for workspace members, `externalUser` for relayed
/// authors and `botActor` for bots and integrations; precedence for `kind` is bot, then external
/// (only when there is no `userId`), then human.
fn comment_author(
    user: Option<payload::UserRef>,
    user_id: Option<String>,
    external_user: Option<payload::UserRef>,
    external_user_id: Option<String>,
    bot_actor: Option<Value>,
) -> Result<Actor, DecodeError> {
    let bot = bot_actor.filter(|value| !value.is_null());
    let is_external = user_id.is_none() && (external_user.is_some() || external_user_id.is_some());
    let kind = match (&bot, is_external) {
        (Some(_), _) => ActorKind::Bot,
        (None, true) => ActorKind::External,
        (None, false) => ActorKind::Human,
    };
    let (user_id_from_obj, user_name) = user.map_or((None, None), |u| (u.id, u.name));
    let (external_id_from_obj, external_name) = external_user.map_or((None, None), |u| (u.id, u.name));
    let id = user_id_from_obj
        .or(user_id)
        .or(external_id_from_obj)
        .or(external_user_id)
        .or_else(|| bot.as_ref().and_then(|b| bot_field(b, "id")))
        .ok_or_else(|| DecodeError::missing("data.userId"))?;
    let name = user_name
        .or(external_name)
        .or_else(|| bot.as_ref().and_then(|b| bot_field(b, "name")))
        .unwrap_or_else(|| id.clone());
    Ok(Actor { id, name, kind, via_app_id: None })
}

/// A field of `botActor`, which is an object (`{id, name, type, …}`) in current payloads; a bare
/// string is taken as both id and name.
fn bot_field(bot: &Value, field: &str) -> Option<String> {
    match bot {
        Value::String(text) => Some(text.clone()),
        Value::Object(map) => map.get(field).and_then(Value::as_str).map(str::to_owned),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::Array(_) => None,
    }
}

/// `None` means "unrouted": the update changed neither delegate nor assignee.
fn issue_update(p: payload::IssuePayload) -> Result<Option<EventKind>, DecodeError> {
    let Some(updated_from) = p.updated_from else { return Ok(None) };
    let change = if let Some(previous) = updated_from.get("delegateId") {
        AssignmentChange::Delegated {
            delegate_id: p.data.delegate_id,
            previous_id: optional_text(previous, "updatedFrom.delegateId")?,
        }
    } else if updated_from.contains_key("assigneeId") {
        AssignmentChange::Assignee { assignee_id: p.data.assignee_id }
    } else {
        return Ok(None);
    };
    let subject = Subject::Linear(LinearSubject {
        organization_id: p.organization_id,
        issue_id: p.data.id,
        identifier: p.data.identifier,
        title: p.data.title,
    });
    Ok(Some(EventKind::Assignment(AssignmentEvent {
        subject,
        actor: envelope_actor(p.actor),
        change,
        description: p.data.description,
    })))
}

/// The envelope `actor`: `user` is a human, `ExternalUser` external, anything else (OAuth clients,
/// integrations, newer kinds) a bot. No actor at all means automation: an unnamed bot.
fn envelope_actor(actor: Option<payload::EnvelopeActor>) -> Actor {
    let Some(actor) = actor else {
        return Actor { id: String::new(), name: String::new(), kind: ActorKind::Bot, via_app_id: None };
    };
    let kind = match actor.kind.as_deref() {
        Some(k) if k.eq_ignore_ascii_case("user") => ActorKind::Human,
        Some(k) if k.eq_ignore_ascii_case("externaluser") => ActorKind::External,
        Some(_) | None => ActorKind::Bot,
    };
    let id = actor.id.unwrap_or_default();
    let name = actor.name.unwrap_or_else(|| id.clone());
    Actor { id, name, kind, via_app_id: None }
}

/// `None` means "unrouted": the session is not on an issue.
fn agent_session(action: &str, p: payload::AgentSessionPayload) -> Option<EventKind> {
    let session = p.agent_session;
    let issue = session.issue;
    let issue_id = session.issue_id.or_else(|| issue.as_ref().and_then(|i| i.id.clone()))?;
    let (identifier, title) = issue.map_or((None, None), |i| (i.identifier, i.title));
    let subject = Subject::Linear(LinearSubject { organization_id: p.organization_id, issue_id, identifier, title });
    let (root_comment_id, root_comment_body) = session.comment.map_or((None, None), |c| (c.id, c.body));
    let (activity_body, signal) = match p.agent_activity {
        Some(activity) => {
            let content_body =
                activity.content.as_ref().and_then(|c| c.get("body")).and_then(Value::as_str).map(str::to_owned);
            (content_body.or(activity.body), activity.signal)
        }
        None => (None, None),
    };
    Some(EventKind::AgentSession(AgentSessionEvent {
        action: action.to_owned(),
        session_id: session.id,
        subject,
        comment_id: session.comment_id.or(root_comment_id),
        body: activity_body.or(root_comment_body),
        signal,
        app_user_id: p.app_user_id.or(session.app_user_id),
    }))
}

/// A JSON string or null, else malformed at `path`.
fn optional_text(value: &Value, path: &str) -> Result<Option<String>, DecodeError> {
    match value {
        Value::String(text) => Ok(Some(text.clone())),
        Value::Null => Ok(None),
        Value::Bool(_) | Value::Number(_) | Value::Array(_) | Value::Object(_) => {
            Err(DecodeError::malformed(format!("{path}: expected a string or null")))
        }
    }
}
