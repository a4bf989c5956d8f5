//! Operator commands: `beckon tasks list|show` and `beckon deliveries list|show`.
//!
//! They read the same data dir as `beckon serve` (SQLite allows readers beside the running
//! server) and print either a table for people or JSON (`--json`) for scripts and tests. They never
//! create a store: pointing them at an empty data dir is an error that says so.

use std::sync::Arc;

use anyhow::{bail, Context};
use beckon_core::clock::SystemClock;
use beckon_core::config::Settings;
use beckon_core::ledger::{DeliveryRecord, Ledger, TaskFilter};
use beckon_core::sqlite;
use beckon_core::task::{Task, TaskId, TaskState};
use clap::Subcommand;

/// `beckon tasks …`
#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// List tasks, newest first.
    List {
        /// Print JSON (one array) instead of a table.
        #[arg(long)]
        json: bool,
        /// Only tasks in this state (queued, dispatched, running, completed, failed, cancelled).
        #[arg(long)]
        state: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Show a task's transcript: what the agent did, in order.
    Transcript {
        /// The task id (`t_…`).
        id: String,
        /// Print JSON (one array) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show one task with its triggers.
    Show {
        /// The task id (`t_…`).
        id: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `beckon deliveries …`
#[derive(Debug, Subcommand)]
pub enum DeliveriesCommand {
    /// List webhook deliveries with the decision taken for each, newest first.
    List {
        /// Print JSON (one array) instead of a table.
        #[arg(long)]
        json: bool,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
}

async fn open_ledger(settings: &Settings) -> anyhow::Result<Arc<dyn Ledger>> {
    if let Some(ledger) = crate::backend::aws_ledger(settings).await? {
        return Ok(ledger);
    }
    let path = settings.sqlite_path();
    if !path.exists() {
        bail!("no Beckon data at {} (run `beckon serve` first, or set BECKON_DATA_DIR)", path.display());
    }
    let (ledger, _queue) =
        sqlite::open(&path, Arc::new(SystemClock)).with_context(|| format!("while opening {}", path.display()))?;
    Ok(Arc::new(ledger))
}

/// Runs a `beckon tasks` command.
pub async fn tasks(settings: &Settings, command: TasksCommand) -> anyhow::Result<()> {
    let ledger = open_ledger(settings).await?;
    match command {
        TasksCommand::List { json, state, limit } => {
            let states = match state {
                Some(s) => vec![TaskState::parse(&s).with_context(|| format!("unknown state {s:?}"))?],
                None => Vec::new(),
            };
            let tasks = ledger.tasks(&TaskFilter { states, thread_key: None, limit: Some(limit) }).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&tasks)?);
            } else {
                print_task_table(&tasks);
            }
        }
        TasksCommand::Transcript { id, json } => {
            let entries = ledger.transcript(&TaskId(id.clone())).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&entries)?);
            } else {
                for e in &entries {
                    let tool = e.tool.as_deref().map(|t| format!(" {t}")).unwrap_or_default();
                    println!("#{} {} {:?}{tool}: {}", e.seq, e.at, e.kind, e.text);
                }
            }
        }
        TasksCommand::Show { id, json } => {
            let task = ledger.task(&TaskId(id.clone())).await?.with_context(|| format!("no task {id}"))?;
            if json {
                println!("{}", serde_json::to_string_pretty(&task)?);
            } else {
                print_task(&task);
            }
        }
    }
    Ok(())
}

/// Runs a `beckon deliveries` command.
pub async fn deliveries(settings: &Settings, command: DeliveriesCommand) -> anyhow::Result<()> {
    let ledger = open_ledger(settings).await?;
    match command {
        DeliveriesCommand::List { json, limit } => {
            let records = ledger.deliveries(limit).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&records)?);
            } else {
                print_delivery_table(&records);
            }
        }
    }
    Ok(())
}

fn print_task_table(tasks: &[Task]) {
    println!("{:<36} {:<10} {:<20} {:<44} TRIGGERS", "ID", "STATE", "CREATED", "THREAD");
    for t in tasks {
        println!(
            "{:<36} {:<10} {:<20} {:<44} {}",
            t.id,
            t.state,
            t.created_at,
            t.thread_key,
            t.comment_ids().join(",")
        );
    }
}

fn print_task(t: &Task) {
    println!("id:          {}", t.id);
    println!("state:       {}", t.state);
    println!("thread:      {}", t.thread_key);
    println!("subject:     {}", t.subject.label());
    println!("created:     {}", t.created_at);
    println!("updated:     {}", t.updated_at);
    println!("attempt:     {} (lease generation {})", t.attempt, t.lease_gen);
    if let Some(reason) = t.cancel_requested {
        println!("cancel:      requested ({reason:?})");
    }
    if let Some(outcome) = &t.outcome {
        println!("outcome:     {}", serde_json::to_string(outcome).unwrap_or_default());
    }
    println!("triggers:");
    for tr in &t.triggers {
        let comment = tr.comment_id.as_deref().unwrap_or("-");
        println!("  - {:?} by {} (comment {comment}, delivery {}) at {}", tr.kind, tr.author, tr.delivery_id, tr.at);
    }
}

fn print_delivery_table(records: &[DeliveryRecord]) {
    println!("{:<48} {:<28} {:<26} {:<36} THREAD", "DELIVERY", "EVENT", "REASON", "TASK");
    for d in records {
        println!(
            "{:<48} {:<28} {:<26} {:<36} {}",
            d.id,
            d.event,
            d.reason.to_string(),
            d.task_id.as_ref().map(|t| t.as_str()).unwrap_or("-"),
            d.thread_key.as_ref().map(|t| t.as_str()).unwrap_or("-"),
        );
    }
}
