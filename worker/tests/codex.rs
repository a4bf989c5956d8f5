//! `worker::codex` against the REAL `codex app-server` (path in `BECKON_TEST_CODEX_BIN`, from
//! `scripts/install-codex`) and the scripted model server `tests/codex/mock_responses.py`.
//! Each test has its own mock (port 0), a tempdir `CODEX_HOME` and a tempdir git repo as cwd.
//! Ignored by default (they need the binary); `scripts/test` / CI run them with the variable set.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use async_trait::async_trait;
use beckon::codex::protocol::{ApprovalPolicy, DynamicToolSpec};
use beckon::codex::{
    run_turn, write_config, CodexConfig, CodexSettings, InterruptReason, ToolHandler, ToolResult, TurnEvent,
    TurnOutcome, TurnRequest, TurnStatus,
};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use tempfile::TempDir;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const NEEDS_BIN: &str = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN";
/// How long the mock may take to write its port file.
const MOCK_START_TIMEOUT: Duration = Duration::from_secs(10);
/// Upper bound for any single test run of Codex.
const TEST_DEADLINE: Duration = Duration::from_secs(60);

struct Mock {
    _child: tokio::process::Child,
    port: u16,
}

async fn start_mock(dir: &Path) -> Result<Mock> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/codex/mock_responses.py");
    let port_file = dir.join("port.txt");
    let child = tokio::process::Command::new("python3")
        .arg(&script)
        .args(["--port", "0", "--port-file"])
        .arg(&port_file)
        .arg("--log")
        .arg(dir.join("requests.jsonl"))
        .kill_on_drop(true)
        .spawn()
        .context("starting the mock model server")?;
    let until = Instant::now() + MOCK_START_TIMEOUT;
    loop {
        if let Ok(text) = std::fs::read_to_string(&port_file) {
            if let Ok(port) = text.trim().parse() {
                return Ok(Mock { _child: child, port });
            }
        }
        if Instant::now() > until {
            bail!("mock did not write {} within {MOCK_START_TIMEOUT:?}", port_file.display());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

struct Fixture {
    _mock: Mock,
    home: TempDir,
    repo: TempDir,
    _scratch: TempDir,
    bin: PathBuf,
}

impl Fixture {
    async fn new() -> Result<Self> {
        let bin = PathBuf::from(std::env::var("BECKON_TEST_CODEX_BIN").context(NEEDS_BIN)?);
        let scratch = tempfile::tempdir()?;
        let mock = start_mock(scratch.path()).await?;
        let home = tempfile::tempdir()?;
        let catalog = home.path().join("mock_model_catalog.json");
        std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/codex/mock_model_catalog.json"), &catalog)?;
        let mut settings = CodexSettings::new("mock-model", "mock", format!("http://127.0.0.1:{}/v1", mock.port));
        settings.model_catalog_json = Some(catalog);
        write_config(home.path(), &settings, None)?;
        let repo = tempfile::tempdir()?;
        let status = std::process::Command::new("git").args(["init", "-q"]).current_dir(repo.path()).status()?;
        anyhow::ensure!(status.success(), "git init failed");
        Ok(Self { _mock: mock, home, repo, _scratch: scratch, bin })
    }

    fn config(&self) -> CodexConfig {
        let env = ["PATH", "HOME", "LANG"]
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v)))
            .collect();
        let mut config =
            CodexConfig::new(self.bin.clone(), self.home.path().to_owned(), self.repo.path().to_owned(), env);
        config.writable_roots = vec![self.repo.path().join(".git")];
        config.timeouts.deadline = TEST_DEADLINE;
        config
    }

    /// Processes whose environment names this fixture's `CODEX_HOME` (i.e. our codex and its children).
    fn live_processes(&self) -> Vec<u32> {
        let needle = format!("CODEX_HOME={}", self.home.path().display());
        let Ok(entries) = std::fs::read_dir("/proc") else { return vec![] };
        entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/environ"))
                    .map(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
                    .unwrap_or(false)
            })
            .collect()
    }
}

#[derive(Default)]
struct Tools {
    calls: Mutex<Vec<(String, Value)>>,
}

#[async_trait]
impl ToolHandler for Tools {
    async fn call(&self, tool: &str, arguments: Value) -> ToolResult {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).push((tool.to_owned(), arguments));
        ToolResult { text: "posted comment 42".into(), success: true }
    }
}

fn comment_reply() -> DynamicToolSpec {
    DynamicToolSpec::Function {
        name: "comment_reply".into(),
        description: "Reply on the issue thread.".into(),
        input_schema: json!({"type": "object", "properties": {"body": {"type": "string"}}, "required": ["body"]}),
    }
}

fn request(prompt: &str) -> TurnRequest {
    TurnRequest { prompt: prompt.into(), dynamic_tools: vec![comment_reply()], ..TurnRequest::default() }
}

async fn run(config: &CodexConfig, req: TurnRequest, tools: &Tools) -> Result<(TurnOutcome, Vec<TurnEvent>)> {
    run_cancellable(config, req, tools, CancellationToken::new()).await
}

async fn run_cancellable(
    config: &CodexConfig,
    req: TurnRequest,
    tools: &Tools,
    cancel: CancellationToken,
) -> Result<(TurnOutcome, Vec<TurnEvent>)> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let outcome = run_turn(config, req, tools, &tx, cancel).await?;
    drop(tx);
    let mut events = vec![];
    while let Some(event) = rx.recv().await {
        events.push(event);
    }
    Ok((outcome, events))
}

#[tokio::test]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn plain_turn_returns_the_final_message_and_usage() -> Result<()> {
    let fx = Fixture::new().await?;
    let tools = Tools::default();
    let started = Instant::now();
    let (outcome, events) = run(&fx.config(), request("hello there"), &tools).await?;
    eprintln!("plain turn: spawn to turn/completed {:?}, whole run_turn {:?}", outcome.elapsed, started.elapsed());
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(outcome.final_message.as_deref(), Some("echo: hello there"));
    assert!(!outcome.resumed);
    assert_eq!(outcome.usage.turn.total_tokens, 120);
    assert_eq!(outcome.usage.turn.input_tokens, 100);
    assert!(events.contains(&TurnEvent::Text { id: text_id(&events), text: "echo: hello there".into() }));
    assert!(events.iter().any(|e| matches!(e, TurnEvent::Usage(u) if u.turn.total_tokens == 120)));
    assert_eq!(fx.live_processes(), Vec::<u32>::new());
    Ok(())
}

fn text_id(events: &[TurnEvent]) -> String {
    events
        .iter()
        .find_map(|e| if let TurnEvent::Text { id, .. } = e { Some(id.clone()) } else { None })
        .unwrap_or_default()
}

#[tokio::test]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn dynamic_tool_call_reaches_the_handler_and_the_model() -> Result<()> {
    let fx = Fixture::new().await?;
    let tools = Tools::default();
    let (outcome, events) =
        run(&fx.config(), request(r#"reply please [[call:comment_reply:{"body":"hi"}]]"#), &tools).await?;
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(*tools.calls.lock().unwrap(), vec![("comment_reply".to_owned(), json!({"body": "hi"}))]);
    let message = outcome.final_message.unwrap_or_default();
    assert!(message.starts_with("done") && message.ends_with(": posted comment 42"), "{message}");
    assert!(events.iter().any(|e| matches!(e, TurnEvent::ToolUse { name, input, .. } if name == "comment_reply" && *input == json!({"body": "hi"}))));
    assert!(events
        .iter()
        .any(|e| matches!(e, TurnEvent::ToolResult { output, success: true, .. } if output == "posted comment 42")));
    Ok(())
}

#[tokio::test]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn resume_in_a_new_process_keeps_the_thread_and_its_tools() -> Result<()> {
    let fx = Fixture::new().await?;
    let tools = Tools::default();
    let config = fx.config();
    let (first, _) = run(&config, request("first"), &tools).await?;
    assert_eq!(first.status, TurnStatus::Completed);
    let second_request = TurnRequest {
        resume_thread_id: Some(first.thread_id.clone()),
        prompt: r#"again [[call:comment_reply:{"body":"again"}]]"#.into(),
        ..TurnRequest::default()
    };
    let started = Instant::now();
    let (second, _) = run(&config, second_request, &tools).await?;
    eprintln!("resumed turn with a tool call: {:?} to turn/completed, {:?} in all", second.elapsed, started.elapsed());
    assert_eq!(
        (second.thread_id.as_str(), second.resumed, second.resume_error.as_deref()),
        (first.thread_id.as_str(), true, None)
    );
    assert_eq!(second.status, TurnStatus::Completed);
    assert_eq!(*tools.calls.lock().unwrap(), vec![("comment_reply".to_owned(), json!({"body": "again"}))]);
    Ok(())
}

#[tokio::test]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn resume_of_an_unknown_thread_falls_back_to_a_new_thread() -> Result<()> {
    let fx = Fixture::new().await?;
    let tools = Tools::default();
    let unknown = "01a1fc72-0000-7000-8000-000000000000";
    let req = TurnRequest {
        resume_thread_id: Some(unknown.into()),
        continuity_note: Some("NOTE: history lost.".into()),
        ..request("hello again")
    };
    let (outcome, events) = run(&fx.config(), req, &tools).await?;
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert!(!outcome.resumed);
    assert_ne!(outcome.thread_id, unknown);
    assert!(outcome.resume_error.is_some());
    assert_eq!(outcome.final_message.as_deref(), Some("echo: NOTE: history lost.\n\nhello again"));
    assert!(matches!(&events[0], TurnEvent::ThreadReady { resumed: false, resume_error: Some(_), .. }));
    Ok(())
}

#[tokio::test]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn stalled_model_trips_the_no_progress_watchdog() -> Result<()> {
    let fx = Fixture::new().await?;
    let mut config = fx.config();
    config.timeouts.no_progress = Duration::from_secs(1);
    let (outcome, _) = run(&config, request("wait [[stall:30]]"), &Tools::default()).await?;
    eprintln!("no-progress interrupt: {:?}", outcome.elapsed);
    assert_eq!(outcome.status, TurnStatus::Interrupted { reason: InterruptReason::NoProgress });
    assert!(outcome.status.is_retryable());
    assert!(!outcome.forced_kill, "codex confirmed the interrupt");
    assert!(outcome.elapsed < Duration::from_secs(10), "{:?}", outcome.elapsed);
    assert_eq!(fx.live_processes(), Vec::<u32>::new());
    Ok(())
}

#[tokio::test]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn overall_deadline_interrupts_the_turn() -> Result<()> {
    let fx = Fixture::new().await?;
    let mut config = fx.config();
    config.timeouts.deadline = Duration::from_secs(3);
    let (outcome, _) = run(&config, request("wait [[stall:30]]"), &Tools::default()).await?;
    assert_eq!(outcome.status, TurnStatus::Interrupted { reason: InterruptReason::Deadline });
    assert_eq!(fx.live_processes(), Vec::<u32>::new());
    Ok(())
}

#[tokio::test]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn cancellation_interrupts_mid_turn() -> Result<()> {
    let fx = Fixture::new().await?;
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    // Cancels once the turn is running (not after a fixed delay: on a loaded machine Codex may take
    // longer than that to start, and the test would cancel before the turn instead of mid-turn).
    let (tx, mut rx) = mpsc::unbounded_channel();
    let canceller = tokio::spawn(async move {
        while let Some(event) = rx.recv().await {
            if matches!(event, TurnEvent::TurnStarted { .. }) {
                tokio::time::sleep(Duration::from_millis(300)).await;
                trigger.cancel();
            }
        }
    });
    let outcome = run_turn(&fx.config(), request("wait [[stall:30]]"), &Tools::default(), &tx, cancel).await?;
    drop(tx);
    canceller.await?;
    assert_eq!(outcome.status, TurnStatus::Interrupted { reason: InterruptReason::Cancelled });
    assert!(!outcome.status.is_retryable());
    assert!(outcome.elapsed < Duration::from_secs(10), "{:?}", outcome.elapsed);
    assert_eq!(fx.live_processes(), Vec::<u32>::new());
    Ok(())
}

#[tokio::test]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn model_http_500_fails_the_turn_with_its_message() -> Result<()> {
    let fx = Fixture::new().await?;
    let (outcome, events) = run(&fx.config(), request("boom [[http:500]]"), &Tools::default()).await?;
    let TurnStatus::Failed { message } = &outcome.status else { bail!("expected Failed, got {:?}", outcome.status) };
    assert!(message.contains("high demand"), "{message}");
    assert!(events.iter().any(|e| matches!(e, TurnEvent::Error { will_retry: false, .. })));
    Ok(())
}

#[tokio::test]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn approvals_are_declined() -> Result<()> {
    let fx = Fixture::new().await?;
    let mut config = fx.config();
    config.approval_policy = ApprovalPolicy::OnRequest;
    let (outcome, events) =
        run(&config, request("[[shell_esc:touch escaped.txt && echo made]]"), &Tools::default()).await?;
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert!(events.iter().any(|e| matches!(e, TurnEvent::ApprovalDeclined { .. })), "{events:#?}");
    assert!(!fx.repo.path().join("escaped.txt").exists());
    Ok(())
}

#[tokio::test]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn the_child_environment_holds_only_the_allow_list() -> Result<()> {
    let secrets = [
        ("AWS_SECRET_ACCESS_KEY", "fake-aws-secret-5150"),
        ("GITHUB_TOKEN", "fake-ghs-token-5150"),
        ("BECKON_LINEAR_API_KEY", "fake-linear-key-5150"),
    ];
    for (key, value) in secrets {
        // Edition 2021: safe. Only this test reads these names.
        std::env::set_var(key, value);
    }
    let fx = Fixture::new().await?;
    let (outcome, events) = run(&fx.config(), request("[[shell:env]]"), &Tools::default()).await?;
    assert_eq!(outcome.status, TurnStatus::Completed);
    let output = events
        .iter()
        .find_map(|e| if let TurnEvent::ToolResult { output, .. } = e { Some(output.clone()) } else { None })
        .context("no command output streamed back")?;
    assert!(output.contains("PATH="), "{output}");
    for (key, value) in secrets {
        assert!(!output.contains(value) && !output.contains(&format!("{key}=")), "{key} leaked: {output}");
    }
    Ok(())
}
