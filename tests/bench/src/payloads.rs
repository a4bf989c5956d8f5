//! The benchmark's deliveries: the real `issue_comment.created` example (tests/fixtures, from
//! `@octokit/webhooks-examples`) with its comment body replaced, in three sizes, three kinds and
//! several issue numbers, each serialized compactly (as GitHub sends it) and signed once.
//!
//! The signature covers the body only, not `X-GitHub-Delivery`, so a load generator can send the
//! same signed body many times under fresh delivery ids: every request is still verified, parsed,
//! decided and recorded, and dedupe never short-circuits. Half the bodies trigger.

use anyhow::Context;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

/// The webhook secret both servers are configured with.
pub const SECRET: &str = "bench-secret-3c1f0a";

/// The example payload everything is built from.
const FIXTURE: &str = include_str!("../../fixtures/github/issue_comment.created.json");

/// Linear's example of a new agent session (someone mentioned or delegated to the agent).
const LINEAR_SESSION_FIXTURE: &str = include_str!("../../fixtures/linear/AgentSessionEvent.created.json");

/// Comment body sizes: a one-liner, a typical bug report, and one near GitHub's 65,536 cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    Small,
    Medium,
    Large,
}

impl Size {
    pub const ALL: [Size; 3] = [Size::Small, Size::Medium, Size::Large];

    pub fn name(self) -> &'static str {
        match self {
            Size::Small => "small",
            Size::Medium => "medium",
            Size::Large => "large",
        }
    }

    /// Filler appended to the body: none, ~4 KB, ~60 KB (a log inside a fenced block).
    fn filler(self) -> String {
        let line = "    at Object.refresh (src/auth/session.ts:118:17) TOKEN_EXPIRED retry=3 status=401\n";
        match self {
            Size::Small => String::new(),
            Size::Medium => format!("\n\nSteps:\n1. sign in\n2. wait an hour\n\n```\n{}```\n", line.repeat(48)),
            Size::Large => format!("\n\nFull log:\n\n```\n{}```\n", line.repeat(720)),
        }
    }
}

/// Who writes the comment and whether it mentions the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `@agent …` by the repository owner: `enqueued` (or `coalesced` while one is queued).
    TriggerOwner,
    /// `@agent …` by an outside contributor: `deferred` (the worker would check permission).
    TriggerContributor,
    /// No mention (the mention only appears inside inline code): `ignored:no_mention`.
    NoMention,
}

/// One signed delivery body.
#[derive(Debug, Clone)]
pub struct Payload {
    pub size: Size,
    pub body: Vec<u8>,
    /// `sha256=<hex>`
    pub signature: String,
}

/// `sha256=<hex>` over `body`, as GitHub sends it.
pub fn sign(body: &[u8]) -> anyhow::Result<String> {
    Ok(format!("sha256={}", hmac_hex(SECRET, body)?))
}

/// The bare hex HMAC-SHA256 of `body` under `secret`: Linear's `Linear-Signature`.
pub fn hmac_hex(secret: &str, body: &[u8]) -> anyhow::Result<String> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).context("while keying the HMAC")?;
    mac.update(body);
    Ok(hex::encode(mac.finalize().into_bytes()))
}

/// The example payload with `body`, `author_association`, issue `number` and comment `id` set.
pub fn comment(body: &str, association: &str, number: u64, comment_id: u64) -> anyhow::Result<Value> {
    let mut payload: Value = serde_json::from_str(FIXTURE).context("while parsing the fixture")?;
    payload["comment"]["body"] = json!(body);
    payload["comment"]["author_association"] = json!(association);
    payload["comment"]["id"] = json!(comment_id);
    payload["issue"]["number"] = json!(number);
    Ok(payload)
}

/// The Linear example `AgentSessionEvent.created` as session `n`: its own session, issue and
/// comment ids (so its own thread), sent at `webhook_timestamp_ms` (Unix milliseconds, inside the
/// replay window).
pub fn linear_session(n: u64, webhook_timestamp_ms: u128) -> anyhow::Result<Value> {
    let mut payload: Value = serde_json::from_str(LINEAR_SESSION_FIXTURE).context("while parsing the fixture")?;
    let (session, issue, comment) =
        (linear_session_id(n), format!("1550e000-0000-4000-8000-{n:012}"), format!("c0330000-0000-4000-8000-{n:012}"));
    let s = &mut payload["agentSession"];
    s["id"] = json!(session);
    s["issueId"] = json!(issue);
    s["issue"]["id"] = json!(issue);
    s["commentId"] = json!(comment);
    s["comment"]["id"] = json!(comment);
    s["comment"]["issueId"] = json!(issue);
    s["comment"]["body"] = json!("@agent the toast is missing when TOKEN_EXPIRED comes back, please fix");
    payload["webhookTimestamp"] = json!(webhook_timestamp_ms);
    Ok(payload)
}

/// The `agentSession.id` of [`linear_session`] `n`.
pub fn linear_session_id(n: u64) -> String {
    format!("5e550000-0000-4000-8000-{n:012}")
}

/// Every (size, kind, issue) combination for issues `1..=issues`: 2 no-mention bodies for every
/// owner and contributor trigger, so half the deliveries trigger.
pub fn set(issues: u64) -> anyhow::Result<Vec<Payload>> {
    let mut out = Vec::new();
    let mut comment_id = 9_000_000;
    for number in 1..=issues {
        for size in Size::ALL {
            for kind in [Kind::TriggerOwner, Kind::NoMention, Kind::TriggerContributor, Kind::NoMention] {
                comment_id += 1;
                let (text, association) = match kind {
                    Kind::TriggerOwner => {
                        ("@agent the toast is missing when TOKEN_EXPIRED comes back, please fix", "OWNER")
                    }
                    Kind::TriggerContributor => ("@agent could you look at the expired-token toast?", "CONTRIBUTOR"),
                    Kind::NoMention => ("Same here: no toast after `@agent` sessions expire. +1", "MEMBER"),
                };
                let body = format!("{text}{}", size.filler());
                let payload = comment(&body, association, number, comment_id)?;
                let bytes = serde_json::to_vec(&payload).context("while serializing a payload")?;
                let signature = sign(&bytes)?;
                out.push(Payload { size, body: bytes, signature });
            }
        }
    }
    Ok(out)
}

/// The set as a Lua chunk for `wrk` (`return { {body=[==[…]==], sig="…"}, … }`).
pub fn lua(set: &[Payload]) -> anyhow::Result<String> {
    let mut out = String::from("return {\n");
    for p in set {
        let body = std::str::from_utf8(&p.body).context("a payload is not UTF-8")?;
        anyhow::ensure!(!body.contains("]==]"), "a payload contains the Lua long-string terminator");
        out.push_str(&format!("{{sig=\"{}\", body=[==[{body}]==]}},\n", p.signature));
    }
    out.push_str("}\n");
    Ok(out)
}
