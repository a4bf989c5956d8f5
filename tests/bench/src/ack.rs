//! Comment → acknowledgement: `beckon serve` (release, no worker) with `BECKON_GITHUB_TOKEN` and
//! `BECKON_GITHUB_API_URL` pointing at the GitHub double. `beckon serve` answers the webhook, then
//! reacts 👀 to the comment (`core::ingest::ack`, `AckMode::Background`) through the GitHub
//! client, whose writes are paced ≥ 1 s apart per installation and bounded by
//! `BACKGROUND_ACK_TIMEOUT` (60 s). Each comment exists on the double (so the reaction is
//! accepted) and is sent on its own issue; the delay is the double's clock at the reaction request
//! minus the moment the webhook request was sent. The run waits until every comment has its
//! reaction, or until [`DRAIN_LIMIT`] has passed since the last webhook was answered.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use tokio::time::Instant;

use crate::stats::{ms, quantile};
use crate::work::World;

/// How long after the last answer the run keeps watching for reactions: past the 60 s background
/// acknowledgement bound, so a reaction that never comes is counted as missing, not cut off.
const DRAIN_LIMIT: Duration = Duration::from_secs(65);

/// One run's figures.
pub struct AckRun {
    pub label: String,
    pub sent: usize,
    /// Webhook sent → reaction request at the double, for the comments that got one.
    pub reacted: Vec<Duration>,
    /// Webhook sent → webhook answered, for every comment.
    pub answered: Vec<Duration>,
}

/// `comments` comments one every `gap` (spaced), or all at once when `gap` is zero (burst).
pub async fn run(beckon: &Path, comments: usize, gap: Duration) -> anyhow::Result<AckRun> {
    let world = World::start(beckon, None, 1).await?;
    // Warm-up: one comment, so connection set-up and first-use costs are out of the figures, then
    // a pause longer than the write pacing.
    let id = world.double.add_comment(1, "@agent please fix the readme", "octocat");
    let resp = world.request(1, id)?.send().await.context("while sending the warm-up webhook")?;
    anyhow::ensure!(resp.status().is_success(), "the warm-up webhook answered {}", resp.status());
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let mut sent_at: HashMap<u64, Instant> = HashMap::new();
    let mut answered = Vec::new();
    let mut joins = Vec::new();
    let start = Instant::now();
    for k in 0..comments {
        let number = 100 + k as u64;
        let id = world.double.add_comment(number, "@agent please fix the readme", "octocat");
        let request = world.request(number, id)?;
        if !gap.is_zero() {
            tokio::time::sleep_until(start + gap * u32::try_from(k).unwrap_or(u32::MAX)).await;
        }
        let sent = Instant::now();
        sent_at.insert(id, sent);
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
    // The reactions follow the answers: wait for all of them, or give up after DRAIN_LIMIT.
    let give_up = Instant::now() + DRAIN_LIMIT;
    let reacted = loop {
        let mut reacted = Vec::new();
        for r in world.double.requests_to("POST", "/reactions") {
            let id = r.path.split('/').rev().nth(1).and_then(|s| s.parse::<u64>().ok());
            if let Some(sent) = id.and_then(|id| sent_at.get(&id)) {
                reacted.push(r.at.saturating_duration_since(*sent));
            }
        }
        if reacted.len() >= comments || Instant::now() >= give_up {
            break reacted;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let label = if gap.is_zero() {
        format!("burst ({comments} at once)")
    } else {
        format!("spaced (one every {:.1} s)", gap.as_secs_f64())
    };
    Ok(AckRun { label, sent: comments, reacted, answered })
}

impl AckRun {
    pub fn row(&self) -> String {
        let mut sorted = self.reacted.clone();
        sorted.sort();
        let last = sorted.last().copied().unwrap_or_default();
        format!(
            "| comment → 👀 acknowledgement at the GitHub double, {} | p50 {} / p99 {} (n={}; {} of {} comments reacted, the last at {}); webhook answered p50 {} / p99 {} |",
            self.label,
            ms(quantile(&self.reacted, 0.5)),
            ms(quantile(&self.reacted, 0.99)),
            self.reacted.len(),
            self.reacted.len(),
            self.sent,
            ms(last),
            ms(quantile(&self.answered, 0.5)),
            ms(quantile(&self.answered, 0.99)),
        )
    }
}
