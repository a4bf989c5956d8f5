//! Load: a burst of triggering deliveries over many threads into `beckon serve`, from several
//! concurrent senders, with the scripted model. Nothing is lost, each thread's tasks finish in
//! the order they were created (and answer in that order), and the process's memory stays
//! bounded. CI runs 60 deliveries over 12 threads; `BECKON_LONG_TESTS=1` runs the full 1,000 over
//! 100. The figures go to stderr (RELIABILITY.md keeps the last ones).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use crate::support::{client, github};
use crate::world::{check_invariants, comment, is_terminal, world};

fn vm_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn a_burst_of_deliveries_loses_nothing_keeps_thread_order_and_bounded_memory() {
    let long = std::env::var("BECKON_LONG_TESTS").is_ok_and(|v| v == "1");
    let (deliveries, threads, senders) = if long { (1_000u64, 100u64, 8u64) } else { (60, 12, 4) };
    eprintln!("load: {deliveries} deliveries over {threads} threads from {senders} senders (long={long})");
    let w = world(&[("BECKON_WORKER_SLOTS", "4"), ("BECKON_MAX_RUNS_PER_HOUR", "1000")]).await;
    let pid = w.beckon.pid();
    let peak = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (Arc::clone(&peak), Arc::clone(&done));
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if let Some(kib) = vm_rss_kib(pid) {
                    peak.fetch_max(kib, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };
    let started = Instant::now();
    // Sender s owns threads s, s+senders, …, so each thread's comments go out in order.
    let mut sends = tokio::task::JoinSet::new();
    for s in 0..senders {
        let (c, base) = (client(), w.beckon.base.clone());
        sends.spawn(async move {
            for n in (0..deliveries).filter(|n| (n % threads) % senders == s) {
                let issue = 100 + n % threads;
                let mut p = comment(&format!("@agent step {n}"), 900_000 + n);
                p["issue"]["number"] = json!(issue);
                let r = github(&c, &base, "issue_comment", &format!("load-{n}"), &p).await;
                assert_eq!(r.status, 200, "{r:?}");
            }
        });
    }
    while let Some(r) = sends.join_next().await {
        r.unwrap();
    }
    let sent_in = started.elapsed();
    let all_tasks = |b: &crate::support::Beckon| -> Vec<Value> {
        serde_json::from_str(&b.cli(&["tasks", "list", "--json", "--limit", "100000"])).unwrap()
    };
    let budget = Duration::from_secs(if long { 3 * 3600 } else { 600 });
    let deadline = Instant::now() + budget;
    let tasks = loop {
        let tasks = all_tasks(&w.beckon);
        if !tasks.is_empty() && tasks.iter().all(is_terminal) {
            break tasks;
        }
        let open = tasks.iter().filter(|t| !is_terminal(t)).count();
        assert!(Instant::now() < deadline, "{open} tasks still open after {budget:?}");
        std::thread::sleep(Duration::from_secs(1));
    };
    let elapsed = started.elapsed();
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();

    let ids: Vec<u64> = (0..deliveries).map(|n| 900_000 + n).collect();
    check_invariants(&w.beckon, &w.github, &ids);
    let recorded: Vec<Value> =
        serde_json::from_str(&w.beckon.cli(&["deliveries", "list", "--json", "--limit", "100000"])).unwrap();
    assert_eq!(recorded.len() as u64, deliveries, "every delivery recorded");
    let failed: Vec<&Value> = tasks.iter().filter(|t| t["state"] != "completed").collect();
    assert!(failed.is_empty(), "{failed:#?}");

    // Per thread: creation order = completion order = reply order, and comments in send order.
    let mut by_thread: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for t in &tasks {
        by_thread.entry(t["thread_key"].as_str().unwrap().to_owned()).or_default().push(t);
    }
    let comments = w.github.comments();
    for (key, mut ts) in by_thread {
        ts.sort_by_key(|t| t["created_at"].as_i64().unwrap());
        let finished: Vec<i64> = ts.iter().map(|t| t["updated_at"].as_i64().unwrap()).collect();
        assert!(finished.windows(2).all(|w| w[0] <= w[1]), "{key}: finished out of order {finished:?}");
        let triggers: Vec<u64> = ts
            .iter()
            .flat_map(|t| t["triggers"].as_array().unwrap().iter())
            .map(|tr| tr["comment_id"].as_str().unwrap().parse().unwrap())
            .collect();
        assert!(triggers.windows(2).all(|w| w[0] < w[1]), "{key}: comments out of order {triggers:?}");
        let reply_order: Vec<&str> = comments
            .iter()
            .filter_map(|c| {
                ts.iter().map(|t| t["id"].as_str().unwrap()).find(|id| c.body.contains(&format!("beckon:task={id};")))
            })
            .collect();
        let created_order: Vec<&str> = ts.iter().map(|t| t["id"].as_str().unwrap()).collect();
        assert_eq!(reply_order, created_order, "{key}: replies out of order");
    }
    let peak_mib = peak.load(Ordering::Relaxed) / 1024;
    eprintln!(
        "load: {deliveries} deliveries, {} tasks, sent in {:.1}s, all terminal after {:.1}s, peak VmRSS {peak_mib} MiB",
        tasks.len(),
        sent_in.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    assert!(peak_mib < 512, "beckon serve's memory should not grow with the backlog: peak {peak_mib} MiB");
}
