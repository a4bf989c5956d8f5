//! `beckon`: the one binary people run.
//!
//! `beckon serve` is the all-in-one embedded default (HTTP ingest over SQLite); `beckon tasks …`
//! and `beckon deliveries …` let an operator see what was decided. `main` only parses the
//! command line, loads settings once, sets up logging and hands over: nothing else lives here.

use std::path::PathBuf;

use anyhow::Context;
use std::sync::Arc;

use beckon::{aws_init, logging, operator, serve, setup};
use beckon_core::aws::secrets::Secrets;
use beckon_core::aws::{DynamoLedger, SqsQueue};
use beckon_core::clock::{Clock, SystemClock};
use beckon_core::config::{vars, Settings};
use beckon_core::config::{AwsSettings, Backend};
use clap::{Parser, Subcommand};

/// mimalloc rather than glibc's malloc: every delivery's body, event and strings are allocated on
/// one thread and often freed on another (the SQLite writer), which glibc serves through locked
/// arenas. Measured: about 7% less CPU per webhook at saturation (BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Summon a coding agent from the tracker you already use.
#[derive(Debug, Parser)]
#[command(name = "beckon", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run everything on this machine: webhook ingest over HTTP and a worker, with the embedded
    /// SQLite store.
    Serve,
    /// Run only the worker: claim queued tasks, run Codex, answer in the thread.
    Worker,
    /// Inspect tasks.
    Tasks {
        #[command(subcommand)]
        command: operator::TasksCommand,
    },
    /// Inspect webhook deliveries and what was decided for each.
    Deliveries {
        #[command(subcommand)]
        command: operator::DeliveriesCommand,
    },
    /// The AWS mode: `beckon aws init` creates the table and queues when missing.
    Aws {
        #[command(subcommand)]
        command: aws_init::AwsCommand,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let settings = load_settings()?;
    logging::init(settings.log_format);
    // Read once here: the worker builds the agent's environment from an allow-list of it.
    let base_env: Vec<(String, String)> = std::env::vars().collect();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("while starting tokio")?;
    runtime.block_on(async move {
        match cli.command {
            Command::Serve => serve::main(settings, base_env).await,
            Command::Worker => worker_main(settings, base_env).await,
            Command::Tasks { command } => operator::tasks(&settings, command).await,
            Command::Deliveries { command } => operator::deliveries(&settings, command).await,
            Command::Aws { command } => aws_init::run(command).await,
        }
    })
}

/// Reads the environment and, when present, `beckon.toml` (or the file `BECKON_CONFIG` names).
fn load_settings() -> anyhow::Result<Settings> {
    let explicit = std::env::var(vars::CONFIG_FILE).ok().map(PathBuf::from);
    let path = explicit.clone().unwrap_or_else(|| PathBuf::from("beckon.toml"));
    let file = match std::fs::read_to_string(&path) {
        Ok(text) => Some((path, text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && explicit.is_none() => None,
        Err(e) => return Err(e).with_context(|| format!("while reading {}", path.display())),
    };
    Settings::load(|name| std::env::var(name).ok(), file).context("while loading settings")
}

/// `beckon worker`: the worker alone, over the configured backend, until SIGINT/SIGTERM.
async fn worker_main(mut settings: Settings, base_env: Vec<(String, String)>) -> anyhow::Result<()> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let (ledger, queue): (Arc<dyn beckon_core::ledger::Ledger>, Arc<dyn beckon_core::queue::Queue>) =
        match settings.backend {
            Some(Backend::Sqlite) => {
                let path = settings.sqlite_path();
                let (l, q) = beckon_core::sqlite::open(&path, Arc::clone(&clock))
                    .with_context(|| format!("while opening {}", path.display()))?;
                (Arc::new(l), Arc::new(q))
            }
            // The worker's default: DynamoDB + SQS through the standard AWS chain.
            Some(Backend::Aws) | None => {
                let aws = AwsSettings::load(|k| std::env::var(k).ok());
                let (table, queue_url) = aws.backend().context("while reading the AWS backend settings")?;
                let sdk = beckon_core::aws::config_loader().load().await;
                let secrets = Secrets::new(&sdk);
                // A tracker whose secret has no value yet is off (a GitHub-only install never fills
                // the Linear token); `setup::build` refuses to start with neither.
                if let (None, Some(arn)) = (&settings.worker.github_app_private_key, &aws.github_app_private_key_arn) {
                    settings.worker.github_app_private_key = secrets.fetch_optional(arn).await?;
                    if settings.worker.github_app_private_key.is_none() {
                        tracing::warn!(%arn, "the GitHub App key secret has no value: GitHub is off for this worker");
                    }
                }
                if let (None, Some(arn)) = (&settings.worker.linear_oauth_token, &aws.linear_oauth_token_arn) {
                    settings.worker.linear_oauth_token = secrets.fetch_optional(arn).await?;
                    if settings.worker.linear_oauth_token.is_none() {
                        tracing::warn!(%arn, "the Linear token secret has no value: Linear is off for this worker");
                    }
                }
                (Arc::new(DynamoLedger::new(&sdk, table, Arc::clone(&clock))), Arc::new(SqsQueue::new(&sdk, queue_url)))
            }
        };
    let worker = match setup::build(&settings, base_env, ledger, queue, clock)? {
        Ok(worker) => Arc::new(worker),
        Err(why) => anyhow::bail!("cannot run a worker: {why:?} (set BECKON_CODEX_BIN and a tracker credential)"),
    };
    let shutdown = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(Arc::clone(&worker).run(shutdown.child_token()));
    serve::shutdown_signal().await;
    shutdown.cancel();
    running.await.context("while stopping the worker")?;
    Ok(())
}
