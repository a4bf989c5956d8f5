//! `beckon`: the one binary people run.
//!
//! `beckon serve` is the all-in-one embedded default (HTTP ingest over SQLite); `beckon tasks …`
//! and `beckon deliveries …` let an operator see what was decided. `main` only parses the
//! command line, loads settings once, sets up logging and hands over: nothing else lives here.

use std::path::PathBuf;

use anyhow::Context;
use beckon::{aws_init, logging, operator, serve};
use beckon_core::config::{vars, Settings};
use clap::{Parser, Subcommand};

/// Summon a coding agent from the tracker you already use.
#[derive(Debug, Parser)]
#[command(name = "beckon", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run everything on this machine: webhook ingest over HTTP with the embedded SQLite store.
    Serve,
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
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("while starting tokio")?;
    runtime.block_on(async move {
        match cli.command {
            Command::Serve => serve::main(settings).await,
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
