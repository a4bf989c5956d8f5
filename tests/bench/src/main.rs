//! `beckon-bench`: the Rust half of Beckon's benchmarks (issue 8), driven by `tests/bench/run`,
//! which also runs the load generator (`wrk`) and the Node.js peer. Every subcommand prints
//! Markdown table rows (`| what | figures |`) on stdout; nothing here asserts a timing.

mod ack;
mod floor;
mod lambda;
mod ledger_scale;
mod payloads;
mod stats;
mod work;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use beckon_core::event::Tracker;
use clap::{Parser, Subcommand};

/// The allocator `beckon` uses, so the floor (and the in-process ledger figures) measure the same
/// work the server does. On glibc's malloc, the floor's loop freed and re-took its 60 KB strings
/// through the heap top, page-faulting on most large iterations.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(about = "Beckon's benchmarks; run them all with tests/bench/run")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Writes the signed delivery set as a Lua table for wrk (`tests/bench/wrk/ingest.lua`).
    Payloads {
        /// Where to write the Lua chunk.
        #[arg(long)]
        lua: PathBuf,
        /// Distinct issue numbers (threads) the bodies spread over.
        #[arg(long, default_value_t = 16)]
        issues: u64,
    },
    /// HMAC-SHA256 + JSON decode in a tight loop, per payload size.
    Floor {
        /// Time per size.
        #[arg(long, default_value_t = 1000)]
        millis: u64,
        /// Also write the mean over the sizes (the HTTP mix), in microseconds, to this file.
        #[arg(long)]
        mix_out: Option<PathBuf>,
    },
    /// Ledger operations after pre-filling 10^n tasks.
    Ledger {
        /// Task counts to pre-fill, comma separated.
        #[arg(long, value_delimiter = ',', default_value = "1000,100000")]
        tasks: Vec<u64>,
        /// Measured calls per point.
        #[arg(long, default_value_t = 300)]
        samples: u64,
        /// Where the ledgers go (one subdirectory per point).
        #[arg(long)]
        dir: PathBuf,
    },
    /// Comment to work: the stages from webhook to `turn/start`, one task at a time.
    Work {
        #[arg(long)]
        beckon: PathBuf,
        #[arg(long)]
        codex: PathBuf,
        #[arg(long, default_value_t = 50)]
        tasks: usize,
    },
    /// Comment → acknowledgement: `beckon serve` (no worker) with a GitHub token and a Linear API
    /// key, spaced and in a burst, on GitHub (👀) and on Linear (an agent session's first thought).
    Ack {
        #[arg(long)]
        beckon: PathBuf,
        /// Comments in the spaced run.
        #[arg(long, default_value_t = 50)]
        comments: usize,
        /// Milliseconds between comments in the spaced run: just over GitHub's one-second write
        /// pacing, so each reaction goes out unpaced.
        #[arg(long, default_value_t = 1200)]
        gap_ms: u64,
        /// Comments sent at once in the burst run (their reactions are paced one per second).
        #[arg(long, default_value_t = 20)]
        burst: usize,
    },
    /// Lambda function cost: binary size, cold start and warm handler time, beside the Node.js peer.
    Lambda {
        /// The release `github-webhook` binary.
        #[arg(long)]
        function: PathBuf,
        /// The Node.js peer (`tests/bench/peer/lambda.mjs`).
        #[arg(long)]
        node_script: PathBuf,
        /// moto's endpoint.
        #[arg(long)]
        endpoint: String,
        /// A table and a queue per configuration, each made by `beckon aws init`, in this order:
        /// the bare function, the Node.js peer, the function as deployed. moto's DynamoDB slows as
        /// a table fills, so each configuration starts on an empty one of its own.
        #[arg(long, value_delimiter = ',')]
        tables: Vec<String>,
        #[arg(long, value_delimiter = ',')]
        queue_urls: Vec<String>,
        /// Fresh processes per implementation.
        #[arg(long, default_value_t = 15)]
        cold: usize,
        /// Warm invocations in one process.
        #[arg(long, default_value_t = 100)]
        warm: usize,
        /// With the two ARNs: also the cold start as deployed, as this GitHub App.
        #[arg(long)]
        app_id: Option<String>,
        /// The Secrets Manager secret (on moto) holding the webhook secret.
        #[arg(long)]
        webhook_secret_arn: Option<String>,
        /// The Secrets Manager secret (on moto) holding the App's private key (PEM).
        #[arg(long)]
        app_key_arn: Option<String>,
    },
    /// Worker scale: tasks per minute, CPU per task and RSS at these slot counts.
    Scale {
        #[arg(long)]
        beckon: PathBuf,
        #[arg(long)]
        codex: PathBuf,
        #[arg(long, value_delimiter = ',', default_value = "8,32")]
        slots: Vec<usize>,
    },
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Cmd::Payloads { lua, issues } => {
            let set = payloads::set(issues)?;
            std::fs::write(&lua, payloads::lua(&set)?).with_context(|| format!("while writing {}", lua.display()))?;
            for size in payloads::Size::ALL {
                let lens: Vec<usize> = set.iter().filter(|p| p.size == size).map(|p| p.body.len()).collect();
                let mean = lens.iter().sum::<usize>() / lens.len().max(1);
                eprintln!("payloads: {} bodies of ~{mean} bytes ({})", lens.len(), size.name());
            }
        }
        Cmd::Floor { millis, mix_out } => {
            let sizes = floor::run(Duration::from_millis(millis))?;
            let mut sum = Duration::ZERO;
            for (size, len, per) in &sizes {
                sum += *per;
                println!("| floor: verify + decode, {} ({len} B) | {:.1} µs |", size.name(), per.as_secs_f64() * 1e6);
            }
            let mix = sum / u32::try_from(sizes.len().max(1)).unwrap_or(1);
            println!("| floor: the HTTP mix (equal thirds) | {:.1} µs |", mix.as_secs_f64() * 1e6);
            if let Some(path) = mix_out {
                std::fs::write(&path, format!("{:.3}\n", mix.as_secs_f64() * 1e6))
                    .with_context(|| format!("while writing {}", path.display()))?;
            }
        }
        Cmd::Ledger { tasks, samples, dir } => {
            for n in tasks {
                let point = ledger_scale::run(&dir.join(n.to_string()), n, samples).await?;
                println!("{}", point.row());
            }
        }
        Cmd::Work { beckon, codex, tasks } => {
            for row in work::latency(&beckon, &codex, tasks).await?.rows() {
                println!("{row}");
            }
        }
        Cmd::Ack { beckon, comments, gap_ms, burst } => {
            for tracker in [Tracker::Github, Tracker::Linear] {
                for (n, gap) in [(comments, Duration::from_millis(gap_ms)), (burst, Duration::ZERO)] {
                    println!("{}", ack::run(&beckon, tracker, n, gap).await?.row());
                }
            }
        }
        Cmd::Lambda {
            function,
            node_script,
            endpoint,
            tables,
            queue_urls,
            cold,
            warm,
            app_id,
            webhook_secret_arn,
            app_key_arn,
        } => {
            let [rust_aws, node_aws, deployed_aws] = lambda::Aws::each(&endpoint, &tables, &queue_urls)?;
            let rust = lambda::Target::bare("Rust (github-webhook)", function.clone(), Vec::new());
            let node_args = vec![node_script.to_str().context("non-UTF-8 script path")?.to_owned()];
            let node =
                lambda::Target::bare("Node.js (@octokit/webhooks + AWS SDK v3)", PathBuf::from("node"), node_args);
            let r = lambda::measure(&rust, &rust_aws, cold, warm, 1_000_000).await?;
            let n = lambda::measure(&node, &node_aws, cold, warm, 2_000_000).await?;
            for row in lambda::rows(&function, &r, &n)? {
                println!("{row}");
            }
            if let (Some(app_id), Some(webhook_secret_arn), Some(app_key_arn)) =
                (app_id, webhook_secret_arn, app_key_arn)
            {
                let deployed = lambda::Deployed { app_id, webhook_secret_arn, app_key_arn };
                let (samples, reacted) = lambda::cold_as_deployed(&function, &deployed_aws, &deployed, cold).await?;
                println!("{}", lambda::deployed_row(&samples, reacted));
            }
        }
        Cmd::Scale { beckon, codex, slots } => {
            for s in slots {
                println!("{}", work::scale(&beckon, &codex, s).await?.row());
            }
        }
    }
    Ok(())
}
