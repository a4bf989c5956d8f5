//! `beckon aws init`: creates the ledger table, the FIFO task queue and its FIFO dead-letter queue
//! when they are missing (`beckon_core::aws::provision`), then prints the `BECKON_*` lines that
//! point Beckon at them. Idempotent; never alters or deletes what exists. Uses the standard AWS
//! chain, so `AWS_ENDPOINT_URL=http://127.0.0.1:4566` targets an emulator.

use anyhow::Context;
use beckon_core::aws::provision::{self, Plan};
use beckon_core::config::vars;

/// `beckon aws …` commands.
#[derive(Debug, clap::Subcommand)]
pub enum AwsCommand {
    /// Create the DynamoDB table (TTL, GSI) and the SQS FIFO queue + DLQ when missing.
    Init {
        /// Table name (default: `BECKON_TABLE_NAME`, else `beckon-local-ledger`).
        #[arg(long)]
        table: Option<String>,
        /// Queue name without `.fifo`; the DLQ is `<name>-dlq.fifo`.
        #[arg(long, default_value = "beckon-local-tasks")]
        queue: String,
        /// Receives before a task message moves to the dead-letter queue.
        #[arg(long, default_value_t = 5)]
        max_receive_count: u32,
        /// The queue's default visibility timeout in seconds (the worker extends it while running).
        #[arg(long, default_value_t = 120)]
        visibility_timeout: u32,
    },
}

/// Runs a `beckon aws` command.
///
/// # Errors
/// When a resource cannot be created or inspected.
pub async fn run(command: AwsCommand) -> anyhow::Result<()> {
    match command {
        AwsCommand::Init { table, queue, max_receive_count, visibility_timeout } => {
            let table = table
                .or_else(|| std::env::var(vars::TABLE_NAME).ok())
                .unwrap_or_else(|| "beckon-local-ledger".to_owned());
            let plan = Plan {
                table_name: table,
                queue_name: format!("{queue}.fifo"),
                dlq_name: format!("{queue}-dlq.fifo"),
                max_receive_count,
                visibility_timeout_secs: visibility_timeout,
            };
            let sdk = beckon_core::aws::config_loader().load().await;
            let done = provision::ensure(&sdk, &plan).await.context("while creating the AWS resources")?;
            let verb = if done.table_created { "created" } else { "found" };
            eprintln!("{verb} table {}; queue {} (DLQ {})", done.table_name, done.queue_url, done.dlq_url);
            println!("{}=aws", vars::BACKEND);
            println!("{}={}", vars::TABLE_NAME, done.table_name);
            println!("{}={}", vars::QUEUE_URL, done.queue_url);
            Ok(())
        }
    }
}
