//! Comment → acknowledgement: `beckon serve` (release, no worker) with a GitHub token and a Linear
//! API key, pointing at the GitHub and Linear doubles. `beckon serve` answers the webhook, then
//! acknowledges (`core::ingest::ack`, `AckMode::Background`, bounded by `BACKGROUND_ACK_TIMEOUT`,
//! 60 s):
//! - GitHub: a 👀 reaction on the comment, through the GitHub client, whose writes are paced ≥ 1 s
//!   apart per installation. Each comment exists on the double (so the reaction is accepted) and
//!   is sent on its own issue.
//! - Linear: the first `thought` in the agent session (`agentActivityCreate`), which Linear wants
//!   within 10 s. Each session is on its own issue. Linear's client has no write pacing.
//!
//! The delay is the double's clock at the acknowledgement request minus the moment the webhook
//! request was sent. The run waits until every comment has its acknowledgement, or until
//! [`DRAIN_LIMIT`] has passed since the last webhook was answered.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use beckon_core::event::Tracker;
use tokio::time::Instant;

use crate::stats::{ms, quantile};
use crate::work::World;

/// How long after the last answer the run keeps watching for acknowledgements: past the 60 s
/// background acknowledgement bound, so one that never comes is counted as missing, not cut off.
const DRAIN_LIMIT: Duration = Duration::from_secs(65);

/// One run's figures.
pub struct AckRun {
    pub tracker: Tracker,
    pub label: String,
    pub sent: usize,
    /// Webhook sent → acknowledgement request at the double, for the comments that got one.
    pub acked: Vec<Duration>,
    /// Webhook sent → webhook answered, for every comment.
    pub answered: Vec<Duration>,
}

/// `comments` requests for work on `tracker`, one every `gap` (spaced), or all at once when `gap`
/// is zero (burst), against a fresh `beckon serve`.
pub async fn run(beckon: &Path, tracker: Tracker, comments: usize, gap: Duration) -> anyhow::Result<AckRun> {
    let world = World::start_with_linear(beckon).await?;
    // Warm-up: one request, so connection set-up and first-use costs are out of the figures, then
    // a pause longer than GitHub's write pacing.
    let (_, warm_up) = request(&world, tracker, 0)?;
    let resp = warm_up.send().await.context("while sending the warm-up webhook")?;
    anyhow::ensure!(resp.status().is_success(), "the warm-up webhook answered {}", resp.status());
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let mut sent_at: HashMap<String, Instant> = HashMap::new();
    let mut answered = Vec::new();
    let mut joins = Vec::new();
    let start = Instant::now();
    for k in 0..comments {
        let (key, request) = request(&world, tracker, 100 + k as u64)?;
        if !gap.is_zero() {
            tokio::time::sleep_until(start + gap * u32::try_from(k).unwrap_or(u32::MAX)).await;
        }
        let sent = Instant::now();
        sent_at.insert(key, sent);
        joins.push(tokio::spawn(async move {
            let resp = request.send().await.context("while sending a webhook")?;
            let status = resp.status();
            let text = resp.text().await.unwrap_or_default();
            anyhow::ensure!(status.is_success() && text.contains("enqueued"), "webhook answered {status}: {text}");
            Ok::<_, anyhow::Error>(sent.elapsed())
        }));
        if !gap.is_zero() {
            // Spaced: wait for this answer before the next comment is due.
            if let Some(join) = joins.pop() {
                answered.push(join.await.context("a webhook task panicked")??);
            }
        }
    }
    for join in joins {
        answered.push(join.await.context("a webhook task panicked")??);
    }
    // The acknowledgements follow the answers: wait for all of them, or give up after DRAIN_LIMIT.
    let give_up = Instant::now() + DRAIN_LIMIT;
    let acked = loop {
        let acked: Vec<Duration> = acknowledgements(&world, tracker)?
            .into_iter()
            .filter_map(|(key, at)| sent_at.get(&key).map(|sent| at.saturating_duration_since(*sent)))
            .collect();
        if acked.len() >= comments || Instant::now() >= give_up {
            break acked;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let label = if gap.is_zero() {
        format!("burst ({comments} at once)")
    } else {
        format!("spaced (one every {:.1} s)", gap.as_secs_f64())
    };
    Ok(AckRun { tracker, label, sent: comments, acked, answered })
}

/// Request `n` for work on `tracker` (its own issue), and the key its acknowledgement carries: the
/// GitHub comment id, or the Linear agent session id.
fn request(world: &World, tracker: Tracker, n: u64) -> anyhow::Result<(String, reqwest::RequestBuilder)> {
    match tracker {
        Tracker::Github => {
            let id = world.double.add_comment(n + 1, "@agent please fix the readme", "octocat");
            Ok((id.to_string(), world.request(n + 1, id)?))
        }
        Tracker::Linear => Ok((crate::payloads::linear_session_id(n), world.linear_request(n)?)),
    }
}

/// Every acknowledgement the double has received: its key (as [`request`] gives it) and when.
fn acknowledgements(world: &World, tracker: Tracker) -> anyhow::Result<Vec<(String, Instant)>> {
    Ok(match tracker {
        Tracker::Github => world
            .double
            .requests_to("POST", "/reactions")
            .into_iter()
            // …/comments/{id}/reactions
            .filter_map(|r| Some((r.path.split('/').rev().nth(1)?.to_owned(), r.at)))
            .collect(),
        Tracker::Linear => world
            .linear
            .as_ref()
            .context("the world has no Linear double")?
            .requests_for("agentActivityCreate")
            .into_iter()
            .filter(|r| r.variables["input"]["content"]["type"] == "thought")
            .filter_map(|r| Some((r.variables["input"]["agentSessionId"].as_str()?.to_owned(), r.at)))
            .collect(),
    })
}

impl AckRun {
    pub fn row(&self) -> String {
        let what = match self.tracker {
            Tracker::Github => "comment → 👀 acknowledgement at the GitHub double",
            Tracker::Linear => "agent session → first thought at the Linear double",
        };
        let mut sorted = self.acked.clone();
        sorted.sort();
        let last = sorted.last().copied().unwrap_or_default();
        format!(
            "| {what}, {} | p50 {} / p99 {} (n={}; {} of {} acknowledged, the last at {}); webhook answered p50 {} / p99 {} |",
            self.label,
            ms(quantile(&self.acked, 0.5)),
            ms(quantile(&self.acked, 0.99)),
            self.acked.len(),
            self.acked.len(),
            self.sent,
            ms(last),
            ms(quantile(&self.answered, 0.5)),
            ms(quantile(&self.answered, 0.99)),
        )
    }
}
