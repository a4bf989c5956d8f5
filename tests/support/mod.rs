//! Test support for end-to-end tests: start the real `beckon` binary with a fresh data dir on a
//! free port, sign and send webhooks the way GitHub and Linear do, and read back what the binary
//! decided through its operator commands and its JSON logs. Every wait has a deadline.

// Each test binary uses a different part of this module; and in test support a failed setup step
// is a failed test, so panicking with a message is the contract.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

/// How long the binary may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long it may take to stop after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// The GitHub webhook secret the tests configure.
pub const GITHUB_SECRET: &str = "gh-test-secret-5b1d0c";
/// The Linear signing secret the tests configure.
pub const LINEAR_SECRET: &str = "lin-test-secret-9f2e77";

/// A running `beckon serve`.
pub struct Beckon {
    child: Option<Child>,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    /// The data dir (deleted on drop).
    pub data_dir: tempfile::TempDir,
    env: Vec<(String, String)>,
    logs: Arc<Mutex<Vec<String>>>,
}

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_beckon"))
}

impl Beckon {
    /// Starts `beckon serve` with both secrets set plus `extra` variables.
    pub fn start(extra: &[(&str, &str)]) -> Beckon {
        let mut env =
            vec![("BECKON_GITHUB_WEBHOOK_SECRET", GITHUB_SECRET), ("BECKON_LINEAR_WEBHOOK_SECRET", LINEAR_SECRET)];
        env.extend_from_slice(extra);
        Beckon::start_with(&env)
    }

    /// Starts `beckon serve` with exactly `vars` (plus data dir, listen address, JSON logs and the
    /// parent's `PATH`, so git and python are found).
    pub fn start_with(vars: &[(&str, &str)]) -> Beckon {
        let data_dir = tempfile::tempdir().expect("tempdir");
        let mut env: Vec<(String, String)> = vec![
            ("BECKON_DATA_DIR".into(), data_dir.path().display().to_string()),
            ("BECKON_LISTEN".into(), "127.0.0.1:0".into()),
            ("BECKON_LOG_FORMAT".into(), "json".into()),
            ("RUST_LOG".into(), "info".into()),
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
        ];
        env.extend(vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        Beckon::spawn(data_dir, env)
    }

    /// Kills the process with SIGKILL (no cleanup at all) and starts a new one on the same data
    /// dir and environment: a crash and a restart.
    pub fn crash_and_restart(mut self) -> Beckon {
        let mut child = self.child.take().expect("running");
        child.kill().expect("SIGKILL");
        child.wait().expect("wait");
        let data_dir = std::mem::replace(&mut self.data_dir, tempfile::tempdir().expect("tempdir"));
        let env = std::mem::take(&mut self.env);
        Beckon::spawn(data_dir, env)
    }

    fn spawn(data_dir: tempfile::TempDir, env: Vec<(String, String)>) -> Beckon {
        let mut cmd = Command::new(bin());
        cmd.arg("serve").env_clear().envs(env.iter().cloned()).current_dir(data_dir.path());
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn beckon serve");
        let stderr = child.stderr.take().expect("stderr piped");
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = logs.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().expect("log lock").push(line);
            }
        });
        let deadline = Instant::now() + START_TIMEOUT;
        let addr = loop {
            let found = logs.lock().expect("log lock").iter().find_map(|l| {
                let v: Value = serde_json::from_str(l).ok()?;
                (v["message"] == "beckon serve listening").then(|| v["addr"].as_str().map(str::to_owned))?
            });
            if let Some(addr) = found {
                break addr;
            }
            if let Some(status) = child.try_wait().expect("try_wait") {
                panic!(
                    "beckon serve exited with {status} before listening; logs:\n{}",
                    logs.lock().unwrap().join("\n")
                );
            }
            assert!(Instant::now() < deadline, "beckon serve did not listen within {START_TIMEOUT:?}");
            std::thread::sleep(Duration::from_millis(20));
        };
        Beckon { child: Some(child), base: format!("http://{addr}"), data_dir, env, logs }
    }

    /// Waits until `pred` holds for `beckon tasks list --json`, or panics after `timeout`.
    pub fn wait_for_tasks(&self, timeout: Duration, what: &str, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let tasks = self.tasks();
            if pred(&tasks) {
                return tasks;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; tasks: {tasks:#?}\nlogs:\n{}",
                self.logs().join("\n")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs `beckon ARGS…` against the same data dir and returns stdout; panics if it fails.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = self.cli_output(args);
        assert!(out.status.success(), "beckon {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("utf-8 stdout")
    }

    /// Runs `beckon ARGS…` against the same data dir.
    pub fn cli_output(&self, args: &[&str]) -> std::process::Output {
        Command::new(bin())
            .args(args)
            .env_clear()
            .envs(self.env.iter().cloned())
            .current_dir(self.data_dir.path())
            .output()
            .expect("run beckon")
    }

    /// `beckon tasks list --json`
    pub fn tasks(&self) -> Vec<Value> {
        serde_json::from_str(&self.cli(&["tasks", "list", "--json"])).expect("tasks json")
    }

    /// `beckon deliveries list --json`
    pub fn deliveries(&self) -> Vec<Value> {
        serde_json::from_str(&self.cli(&["deliveries", "list", "--json", "--limit", "1000"])).expect("deliveries json")
    }

    /// The process id of the running `beckon serve`.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Every log line so far.
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().expect("log lock").clone()
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn stop(mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
        assert!(status.success());
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "beckon serve did not stop within {STOP_TIMEOUT:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Beckon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `sha256=<hex>` over `body` with `secret`, as GitHub sends it.
pub fn github_signature(secret: &str, body: &[u8]) -> String {
    format!("sha256={}", hmac_hex(secret, body))
}

/// Bare hex HMAC over `body`, as Linear sends it.
pub fn hmac_hex(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

/// An HTTP response's status and JSON body.
#[derive(Debug)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Parsed JSON body (`Value::Null` when not JSON).
    pub body: Value,
}

/// A client with a request deadline.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(20)).build().expect("client")
}

/// POSTs `body` to `url` with `headers`.
pub async fn post(client: &reqwest::Client, url: &str, headers: &[(&str, String)], body: Vec<u8>) -> Reply {
    let mut req = client.post(url).body(body);
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let resp = req.send().await.expect("send");
    let status = resp.status().as_u16();
    let bytes = resp.bytes().await.expect("body");
    Reply { status, body: serde_json::from_slice(&bytes).unwrap_or(Value::Null) }
}

/// POSTs a signed GitHub delivery (JSON content type).
pub async fn github(client: &reqwest::Client, base: &str, event: &str, delivery: &str, payload: &Value) -> Reply {
    let body = serde_json::to_vec(payload).expect("json");
    let headers = [
        ("content-type", "application/json".to_owned()),
        ("x-github-event", event.to_owned()),
        ("x-github-delivery", delivery.to_owned()),
        ("x-hub-signature-256", github_signature(GITHUB_SECRET, &body)),
        ("user-agent", "GitHub-Hookshot/test".to_owned()),
    ];
    post(client, &format!("{base}/webhooks/github"), &headers, body).await
}

/// POSTs a signed Linear delivery.
pub async fn linear(client: &reqwest::Client, base: &str, delivery: &str, payload: &Value) -> Reply {
    let body = serde_json::to_vec(payload).expect("json");
    let headers = [
        ("content-type", "application/json; charset=utf-8".to_owned()),
        ("linear-delivery", delivery.to_owned()),
        ("linear-event", payload["type"].as_str().unwrap_or("").to_owned()),
        ("linear-signature", hmac_hex(LINEAR_SECRET, &body)),
    ];
    post(client, &format!("{base}/webhooks/linear"), &headers, body).await
}

/// A fixture from `tests/fixtures/`.
pub fn fixture(path: &str) -> Value {
    let full = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures").join(path);
    let text = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()));
    serde_json::from_str(&text).expect("fixture json")
}

/// Now in Unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_millis() as i64
}
