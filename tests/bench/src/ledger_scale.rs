//! Ledger scale: how the ingest path's ledger work grows with the number of recorded tasks.
//!
//! Pre-fills a fresh SQLite ledger through the public `Ledger` API (`trigger::decide` on a real
//! decoded delivery, then `Ledger::apply`, one task per issue, so each is its own thread), then
//! times `Ingest::handle` in-process (verify, decode, thread snapshot, apply, enqueue, mark) for
//! new triggering deliveries on new threads, and `Ledger::thread` alone. Pre-filling runs 64
//! deliveries at once (the ledger commits them in groups) and skips the
//! queue, so the recorded tasks stay `queued` and off the queue table: the measured calls see the
//! big tasks and deliveries tables, not a long queue.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use beckon_core::clock::{Clock, SystemClock};
use beckon_core::config::Settings;
use beckon_core::event::Tracker;
use beckon_core::ingest::{github, Headers, Ingest, IngestConfig, Outcome, WebhookRequest, LINEAR_REPLAY_WINDOW};
use beckon_core::ledger::{Ledger, NewDelivery};
use beckon_core::queue::Queue;
use beckon_core::trigger::Rules;
use beckon_core::{sqlite, trigger};
use secrecy::SecretString;

use crate::payloads;
use crate::stats::{ms, quantile};

/// How many pre-fill deliveries run at once.
const FILL_IN_FLIGHT: usize = 64;

/// One scale point's figures.
pub struct Point {
    pub tasks: u64,
    pub fill_rate: f64,
    pub handle_p50: Duration,
    pub handle_p99: Duration,
    pub thread_p50: Duration,
    pub thread_p99: Duration,
    pub db_mib: f64,
}

/// Fills `dir/beckon.sqlite3` with `tasks` tasks, then measures `samples` calls of each kind.
pub async fn run(dir: &Path, tasks: u64, samples: u64) -> anyhow::Result<Point> {
    std::fs::create_dir_all(dir).with_context(|| format!("while creating {}", dir.display()))?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let path = dir.join("beckon.sqlite3");
    let (ledger, queue) = sqlite::open(&path, clock.clone()).context("while opening the ledger")?;
    let ledger: Arc<dyn Ledger> = Arc::new(ledger);
    let queue: Arc<dyn Queue> = Arc::new(queue);
    let settings = Settings::load(|_| None, None).context("while loading default settings")?;
    let rules = settings.rules.clone();

    // Many fills in flight, so the ledger's group commit batches them (one `fsync` per batch).
    let started = Instant::now();
    let mut fills = tokio::task::JoinSet::new();
    for n in 1..=tasks {
        if fills.len() >= FILL_IN_FLIGHT {
            fills.join_next().await.context("a fill task vanished")?.context("a fill task panicked")??;
        }
        let (ledger, clock, rules) = (Arc::clone(&ledger), Arc::clone(&clock), rules.clone());
        fills.spawn(async move { fill_one(&*ledger, &*clock, &rules, n).await });
    }
    while let Some(done) = fills.join_next().await {
        done.context("a fill task panicked")??;
    }
    let fill_rate = tasks as f64 / started.elapsed().as_secs_f64();

    let ingest = Ingest::new(
        IngestConfig {
            github_secrets: vec![SecretString::from(payloads::SECRET.to_owned())],
            linear_secrets: Vec::new(),
            rules: rules.clone(),
            max_body_bytes: settings.max_body_bytes,
            linear_replay_window: LINEAR_REPLAY_WINDOW,
        },
        Arc::clone(&ledger),
        queue,
        Arc::clone(&clock),
    );
    let mut handle = Vec::new();
    let mut thread = Vec::new();
    for i in 0..samples {
        let n = tasks + 1 + i;
        let body = serde_json::to_vec(&payloads::comment("@agent please fix the toast", "OWNER", n, n)?)?;
        let headers = Headers::new([
            ("content-type".to_owned(), "application/json".to_owned()),
            ("x-github-event".to_owned(), "issue_comment".to_owned()),
            ("x-github-delivery".to_owned(), format!("measure-{n}")),
            ("x-hub-signature-256".to_owned(), payloads::sign(&body)?),
        ]);
        let t = Instant::now();
        let outcome =
            ingest.handle(WebhookRequest { tracker: Tracker::Github, headers, body: body.clone().into() }).await;
        handle.push(t.elapsed());
        anyhow::ensure!(
            matches!(outcome, Outcome::Accepted { .. }),
            "a measured delivery was not accepted: {}",
            outcome.code()
        );

        // A thread snapshot of an old thread, somewhere in the filled range.
        let old = 1 + (i * 7919) % tasks.max(1);
        let old_body = serde_json::to_vec(&payloads::comment("@agent again", "OWNER", old, old)?)?;
        let event = github::decode("issue_comment", "probe", &old_body)?;
        if let Some((key, root)) = trigger::thread_of(&event, &rules.handle) {
            let t = Instant::now();
            ledger.thread(&key, root.as_deref(), clock.now().minus(rules.budget_window)).await?;
            thread.push(t.elapsed());
        }
    }
    let db_bytes: u64 = ["beckon.sqlite3", "beckon.sqlite3-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
        .map(|m| m.len())
        .sum();
    Ok(Point {
        tasks,
        fill_rate,
        handle_p50: quantile(&handle, 0.5),
        handle_p99: quantile(&handle, 0.99),
        thread_p50: quantile(&thread, 0.5),
        thread_p99: quantile(&thread, 0.99),
        db_mib: db_bytes as f64 / (1024.0 * 1024.0),
    })
}

/// Records one triggering delivery on its own thread (issue `n`), as ingest would minus the queue.
async fn fill_one(ledger: &dyn Ledger, clock: &dyn Clock, rules: &Rules, n: u64) -> anyhow::Result<()> {
    let body = serde_json::to_vec(&payloads::comment("@agent please fix the toast", "OWNER", n, n)?)?;
    let event =
        github::decode("issue_comment", &format!("fill-{n}"), &body).context("while decoding a fill delivery")?;
    let now = clock.now();
    let thread = trigger::thread_of(&event, &rules.handle);
    let snapshot = match &thread {
        Some((key, root)) => ledger.thread(key, root.as_deref(), now.minus(rules.budget_window)).await?,
        None => Default::default(),
    };
    let decision = trigger::decide(&event, rules, &snapshot, now);
    let delivery = NewDelivery {
        id: format!("github:fill-{n}"),
        tracker: Tracker::Github,
        event: "comment.created".to_owned(),
        thread_key: thread.map(|(key, _)| key),
        reason: decision.reason,
    };
    ledger.apply(&delivery, &decision.effect).await.context("while pre-filling the ledger")?;
    Ok(())
}

impl Point {
    /// A Markdown table row.
    pub fn row(&self) -> String {
        format!(
            "| ledger at {} tasks | Ingest::handle p50 {} / p99 {}; Ledger::thread p50 {} / p99 {}; db {:.1} MiB (filled at {:.0} tasks/s) |",
            self.tasks,
            ms(self.handle_p50),
            ms(self.handle_p99),
            ms(self.thread_p50),
            ms(self.thread_p99),
            self.db_mib,
            self.fill_rate
        )
    }
}
