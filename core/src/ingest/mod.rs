//! Ingest: one webhook delivery in, one HTTP outcome out.
//!
//! `verify → decode → normalize → trigger rules → ledger (conditional) → enqueue → outcome`, the
//! same function for `beckon serve` and the Lambda functions, so both answer alike. Each step is a
//! pure function from the sibling modules; this module only sequences them and does the two I/O
//! calls (ledger, queue). Choices:
//! - The signature is checked before anything else looks at the body (after the size cap).
//! - Rejections (4xx) change nothing and are logged at `warn` with a reason, never the body.
//! - A ledger failure answers 500: nothing was recorded, and Linear retries 500s. GitHub does not
//!   retry, but a 2xx would claim we recorded something we did not.
//! - A queue failure after the ledger write still answers 200: the task is recorded as `queued`
//!   and [`crate::sweep`] re-enqueues it; answering 5xx would invite a redelivery that dedupes
//!   anyway. A successful send is marked on the task (`enqueued_at`) so the sweeper skips it.
//! - The HTTP mapping (status, short code) lives in [`Outcome::status`] and [`Outcome::code`] only.

pub mod ack;
pub mod decode;
pub mod github;
pub mod linear;

use std::sync::Arc;
use std::time::Duration;

use secrecy::SecretString;
use serde::Serialize;
use tracing::{info, warn, Instrument};

use crate::clock::Clock;
use crate::decision::ReasonCode;
use crate::event::{Event, EventKind, Tracker};
use crate::ledger::{Applied, Decide, Ledger, LedgerError, NewDelivery, ThreadQuery};
use crate::queue::{Queue, QueueMessage};
use crate::task::{TaskId, Transition};
use crate::trigger::{self, Rules};
use crate::verify::{self, VerifyError};

use self::ack::{Ack, Acknowledge};
use self::decode::DecodeError;

/// Linear's recommended replay window for `webhookTimestamp`.
pub const LINEAR_REPLAY_WINDOW: Duration = Duration::from_secs(60);

/// Request headers, names compared case-insensitively.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers(Vec<(String, String)>);

impl Headers {
    /// Headers from `(name, value)` pairs.
    pub fn new(pairs: impl IntoIterator<Item = (String, String)>) -> Headers {
        let lowercase = |(mut k, v): (String, String)| {
            k.make_ascii_lowercase();
            (k, v)
        };
        Headers(pairs.into_iter().map(lowercase).collect())
    }

    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// One webhook delivery as received.
#[derive(Debug, Clone)]
pub struct WebhookRequest {
    /// Which endpoint it arrived on.
    pub tracker: Tracker,
    /// Its headers.
    pub headers: Headers,
    /// The raw body: exactly the bytes the signature covers. `Bytes`, so an HTTP server can hand
    /// over the buffer the body arrived in without copying it.
    pub body: bytes::Bytes,
}

/// How ingest is configured.
#[derive(Debug, Clone)]
pub struct IngestConfig {
    /// GitHub webhook secrets; empty disables the GitHub endpoint (404).
    pub github_secrets: Vec<SecretString>,
    /// Linear signing secrets; empty disables the Linear endpoint (404).
    pub linear_secrets: Vec<SecretString>,
    /// The trigger rules.
    pub rules: Rules,
    /// Bodies larger than this get 413.
    pub max_body_bytes: usize,
    /// Allowed distance between Linear's `webhookTimestamp` and now.
    pub linear_replay_window: Duration,
}

/// The ingest stage with its dependencies. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Ingest {
    config: Arc<IngestConfig>,
    ledger: Arc<dyn Ledger>,
    queue: Arc<dyn Queue>,
    clock: Arc<dyn Clock>,
    ack: Option<(Arc<dyn Acknowledge>, AckMode)>,
}

/// When the acknowledgement happens relative to the webhook's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckMode {
    /// Before answering, bounded by [`ack::ACK_TIMEOUT`]: for Lambda, where nothing runs after
    /// the handler returns.
    Inline,
    /// After answering, on a spawned task bounded by [`ack::BACKGROUND_ACK_TIMEOUT`]: for a
    /// long-running server, so GitHub's one-write-per-second pacing never holds a webhook's answer
    /// (a burst of comments is acknowledged one per second instead).
    Background,
}

/// Why a request was refused. Nothing was recorded.
#[derive(Debug, thiserror::Error)]
pub enum Rejection {
    /// No secret is configured for this tracker: the endpoint is off (404).
    #[error("endpoint disabled: no webhook secret configured")]
    Disabled,
    /// The body exceeds the configured cap (413).
    #[error("body over {limit} bytes")]
    TooLarge {
        /// The cap.
        limit: usize,
    },
    /// Signature or replay-window failure (401).
    #[error(transparent)]
    Unauthorized(#[from] VerifyError),
    /// A content type other than JSON or form (415), or a body that is not the event it claims (400).
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A required header is missing (400).
    #[error("missing header {0}")]
    MissingHeader(&'static str),
    /// The transport could not read the body (the client went away, a bad chunk) (400).
    #[error("body could not be read")]
    BodyUnreadable,
}

/// What ingest did with a delivery.
#[derive(Debug)]
pub enum Outcome {
    /// Verified and recorded with this reason (200).
    Accepted {
        /// The final reason code.
        reason: ReasonCode,
        /// The task created, joined or cancelled, if any.
        task_id: Option<TaskId>,
    },
    /// This delivery id was already recorded: nothing changed (200).
    Duplicate,
    /// Refused; nothing changed (4xx).
    Rejected(Rejection),
    /// The ledger failed; nothing was recorded (500, so Linear retries).
    Failed(LedgerError),
}

/// The small JSON body the webhook caller sees. No internal detail.
#[derive(Debug, Serialize)]
pub struct OutcomeBody {
    /// A short code: a reason code, `duplicate`, or an error code.
    pub outcome: String,
    /// The task id, when one was involved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

impl Outcome {
    /// The HTTP status for this outcome. Linear counts anything but 200 as a failure, so every
    /// success is exactly 200.
    pub fn status(&self) -> u16 {
        match self {
            Outcome::Accepted { .. } | Outcome::Duplicate => 200,
            Outcome::Rejected(r) => match r {
                Rejection::Disabled => 404,
                Rejection::TooLarge { .. } => 413,
                Rejection::Unauthorized(_) => 401,
                Rejection::Decode(DecodeError::UnsupportedMediaType { .. }) => 415,
                Rejection::Decode(DecodeError::Malformed { .. })
                | Rejection::MissingHeader(_)
                | Rejection::BodyUnreadable => 400,
            },
            Outcome::Failed(_) => 500,
        }
    }

    /// A short stable code for the response body and the log line.
    pub fn code(&self) -> String {
        match self {
            Outcome::Accepted { reason, .. } => reason.to_string(),
            Outcome::Duplicate => "duplicate".to_owned(),
            Outcome::Rejected(r) => match r {
                Rejection::Disabled => "disabled",
                Rejection::TooLarge { .. } => "too_large",
                Rejection::Unauthorized(_) => "unauthorized",
                Rejection::Decode(DecodeError::UnsupportedMediaType { .. }) => "unsupported_media_type",
                Rejection::Decode(DecodeError::Malformed { .. }) => "malformed",
                Rejection::MissingHeader(_) => "missing_header",
                Rejection::BodyUnreadable => "unreadable_body",
            }
            .to_owned(),
            Outcome::Failed(_) => "unavailable".to_owned(),
        }
    }

    /// The response body.
    pub fn body(&self) -> OutcomeBody {
        let task_id = match self {
            Outcome::Accepted { task_id, .. } => task_id.as_ref().map(|t| t.to_string()),
            Outcome::Duplicate | Outcome::Rejected(_) | Outcome::Failed(_) => None,
        };
        OutcomeBody { outcome: self.code(), task_id }
    }
}

impl Ingest {
    /// Ingest over the given ledger, queue and clock.
    pub fn new(config: IngestConfig, ledger: Arc<dyn Ledger>, queue: Arc<dyn Queue>, clock: Arc<dyn Clock>) -> Self {
        Ingest { config: Arc::new(config), ledger, queue, clock, ack: None }
    }

    /// Acknowledges recorded requests for work through `ack` (see [`ack`]), as `mode` says.
    #[must_use]
    pub fn with_ack(mut self, ack: Arc<dyn Acknowledge>, mode: AckMode) -> Self {
        self.ack = Some((ack, mode));
        self
    }

    /// The configuration.
    pub fn config(&self) -> &IngestConfig {
        &self.config
    }

    /// True when `tracker`'s endpoint has a secret (and so is on).
    pub fn enabled(&self, tracker: Tracker) -> bool {
        !self.secrets(tracker).is_empty()
    }

    fn secrets(&self, tracker: Tracker) -> &[SecretString] {
        match tracker {
            Tracker::Github => &self.config.github_secrets,
            Tracker::Linear => &self.config.linear_secrets,
        }
    }

    /// Handles one delivery end to end and logs one line saying what happened and why.
    /// Never panics on any input; every outcome is a value.
    pub async fn handle(&self, req: WebhookRequest) -> Outcome {
        let delivery_id = delivery_id(req.tracker, &req.headers);
        let outcome = match self.verify_and_decode(&req) {
            Ok(event) => {
                let target = ack::ack_for(&event);
                let outcome = self.record(event, delivery_id).await;
                if let (Outcome::Accepted { reason, .. }, Some(target), Some((acker, mode))) =
                    (&outcome, target, &self.ack)
                {
                    if reason.is_work() {
                        // A span for the acknowledgement's own lines (it may outlive this call).
                        let span = tracing::info_span!("delivery", tracker = %req.tracker, delivery_id);
                        match mode {
                            AckMode::Inline => {
                                acknowledge(&**acker, &target, ack::ACK_TIMEOUT).instrument(span).await;
                            }
                            // Best effort and bounded: not awaited by anyone, and nothing to clean up
                            // if the process stops first.
                            AckMode::Background => {
                                let acker = Arc::clone(acker);
                                let work = async move {
                                    acknowledge(&*acker, &target, ack::BACKGROUND_ACK_TIMEOUT).await;
                                };
                                tokio::spawn(work.instrument(span));
                            }
                        }
                    }
                }
                outcome
            }
            Err(rejection) => Outcome::Rejected(rejection),
        };
        log_outcome(req.tracker, delivery_id, &outcome);
        outcome
    }

    /// Refuses a delivery the transport already judged (an over-long body, a disabled endpoint),
    /// logging it exactly like [`Ingest::handle`] would.
    pub fn refuse(&self, tracker: Tracker, headers: &Headers, rejection: Rejection) -> Outcome {
        let outcome = Outcome::Rejected(rejection);
        log_outcome(tracker, delivery_id(tracker, headers), &outcome);
        outcome
    }

    /// The pure half: cap, signature, headers, content type, decode, replay window.
    fn verify_and_decode(&self, req: &WebhookRequest) -> Result<Event, Rejection> {
        let secrets = self.secrets(req.tracker);
        if secrets.is_empty() {
            return Err(Rejection::Disabled);
        }
        if req.body.len() > self.config.max_body_bytes {
            return Err(Rejection::TooLarge { limit: self.config.max_body_bytes });
        }
        match req.tracker {
            Tracker::Github => {
                verify::github(secrets, &req.body, req.headers.get("x-hub-signature-256"))?;
                let event_name = req.headers.get("x-github-event").ok_or(Rejection::MissingHeader("X-GitHub-Event"))?;
                let delivery =
                    req.headers.get("x-github-delivery").ok_or(Rejection::MissingHeader("X-GitHub-Delivery"))?;
                let json = github::payload_bytes(req.headers.get("content-type"), &req.body)?;
                Ok(github::decode(event_name, delivery, &json)?)
            }
            Tracker::Linear => {
                verify::linear(secrets, &req.body, req.headers.get("linear-signature"))?;
                let delivery = req.headers.get("linear-delivery").ok_or(Rejection::MissingHeader("Linear-Delivery"))?;
                let decoded = linear::decode(delivery, &req.body)?;
                verify::linear_timestamp(
                    decoded.webhook_timestamp,
                    self.clock.now(),
                    self.config.linear_replay_window,
                )?;
                Ok(decoded.event)
            }
        }
    }

    /// The I/O half: the rules over a fresh thread snapshot and the ledger write (one step, see
    /// [`Ledger::decide_and_apply`]), then the enqueue. The snapshot is read only when the decision
    /// depends on it ([`trigger::decide_unread`]).
    async fn record(&self, event: Event, delivery_id: &str) -> Outcome {
        let now = self.clock.now();
        let config = Arc::clone(&self.config);
        let thread = trigger::thread_of(&event, &config.rules.handle).map(|(key, root_id)| ThreadQuery {
            key,
            root_id,
            window_start: now.minus(config.rules.budget_window),
        });
        let thread_key = thread.as_ref().map(|q| q.key.clone());
        // The markdown scan here, so the ledger's step (one writer for all requests, on SQLite)
        // runs only what depends on the thread.
        let reading = trigger::read(&event, &config.rules);
        // Most deliveries are settled without the thread's state: then it is not read at all.
        let settled = trigger::decide_unread(&event, &config.rules, &reading, now);
        let thread = if settled.is_some() { None } else { thread };
        let decide: Decide = Box::new(move |snapshot| {
            let decision = match settled {
                Some(decision) => decision,
                None => trigger::decide_read(&event, &config.rules, &reading, snapshot, now),
            };
            let delivery = NewDelivery {
                id: format!("{}:{}", event.tracker, event.delivery_id),
                tracker: event.tracker,
                event: event_label(&event),
                thread_key,
                reason: decision.reason,
            };
            (delivery, decision.effect)
        });
        let (applied, rules_reason) = match self.ledger.decide_and_apply(thread, decide).await {
            Ok(done) => done,
            Err(e) => return Outcome::Failed(e),
        };
        let reason = applied.reason(rules_reason);
        match applied {
            Applied::Duplicate => Outcome::Duplicate,
            Applied::Enqueued(task) => {
                let msg = QueueMessage { task_id: task.id.clone(), group: task.thread_key.clone() };
                match self.queue.send(&msg).await {
                    Ok(()) => {
                        // Tells the sweeper this one arrived. If the mark itself fails, the sweeper
                        // resends a task already on the queue: harmless, it dedupes by task id.
                        if let Err(e) = self.ledger.transition(&task.id, &Transition::Enqueued).await {
                            warn!(delivery_id, task_id = %task.id, error = %e, "enqueued, but not marked so");
                        }
                    }
                    Err(e) => {
                        warn!(
                            delivery_id,
                            task_id = %task.id,
                            error = %e,
                            "enqueue failed; the task stays queued for the sweeper"
                        )
                    }
                }
                Outcome::Accepted { reason, task_id: Some(task.id) }
            }
            Applied::Coalesced(task) => Outcome::Accepted { reason, task_id: Some(task.id) },
            Applied::KnownComment(id) | Applied::TaskFull(id) => Outcome::Accepted { reason, task_id: Some(id) },
            Applied::Cancelled(ids) => Outcome::Accepted { reason, task_id: ids.into_iter().next() },
            Applied::Recorded | Applied::NothingToCancel => Outcome::Accepted { reason, task_id: None },
        }
    }
}

/// Acknowledges within `limit`; a failure is logged and changes nothing.
async fn acknowledge(acker: &dyn Acknowledge, target: &Ack, limit: Duration) {
    match tokio::time::timeout(limit, acker.acknowledge(target)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => warn!(error = %e, "acknowledgement failed; the delivery is recorded regardless"),
        Err(_) => warn!(timeout = ?limit, "acknowledgement timed out; the delivery is recorded regardless"),
    }
}

/// The delivery id header's value, or "" when it is missing (the request is then refused).
fn delivery_id(tracker: Tracker, headers: &Headers) -> &str {
    let header = match tracker {
        Tracker::Github => "x-github-delivery",
        Tracker::Linear => "linear-delivery",
    };
    headers.get(header).unwrap_or("")
}

/// The delivery's one line. Its tracker and id are fields of the line itself rather than of a
/// span around the request: a span per delivery (created, entered at every poll, closed, and its
/// fields re-read for the line) cost more than the line (BENCHMARKS.md).
fn log_outcome(tracker: Tracker, delivery_id: &str, outcome: &Outcome) {
    match outcome {
        Outcome::Accepted { reason, task_id } => {
            let task_id = task_id.as_ref().map(TaskId::as_str);
            info!(%tracker, delivery_id, outcome = %reason, task_id, "delivery accepted");
        }
        Outcome::Duplicate => info!(%tracker, delivery_id, outcome = "duplicate", "delivery already recorded"),
        Outcome::Rejected(r) => {
            let (status, code) = (outcome.status(), outcome.code());
            warn!(%tracker, delivery_id, status, outcome = %code, reason = %r, "delivery rejected");
        }
        Outcome::Failed(e) => {
            warn!(%tracker, delivery_id, status = 500, error = %e, "ledger unavailable: delivery not recorded");
        }
    }
}

/// `issue_comment.created`-style label for operators.
fn event_label(event: &Event) -> String {
    match &event.kind {
        EventKind::Comment(c) => {
            let action = match c.comment.placement {
                crate::event::Placement::ReviewThread { .. } => "review_comment",
                crate::event::Placement::TopLevel
                | crate::event::Placement::Reply { .. }
                | crate::event::Placement::AgentSession { .. } => "comment",
            };
            let verb = match c.action {
                crate::event::CommentAction::Created => "created",
                crate::event::CommentAction::Edited { .. } => "edited",
                crate::event::CommentAction::Deleted => "deleted",
            };
            format!("{action}.{verb}")
        }
        EventKind::Assignment(_) => "assignment".to_owned(),
        EventKind::AgentSession(s) => format!("agent_session.{}", s.action),
        EventKind::Unrouted(u) => match &u.action {
            Some(a) => format!("{}.{a}", u.event),
            None => u.event.clone(),
        },
    }
}
