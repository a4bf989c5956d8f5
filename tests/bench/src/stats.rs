//! Small measuring helpers: percentiles over durations, and a process's CPU time and peak RSS
//! from `/proc` (Linux only, which is where the benchmarks run).

use std::time::Duration;

use anyhow::Context;

/// The `q` quantile (0..=1) of `samples` (nearest rank); zero for no samples.
pub fn quantile(samples: &[Duration], q: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Milliseconds with two decimals.
pub fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// The process's own user + system CPU time (children excluded), from `/proc/<pid>/stat`.
pub fn cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("while reading /proc/{pid}/stat"))?;
    // The command name (field 2) may hold spaces; fields after its closing parenthesis are plain.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).context("malformed /proc stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let ticks: u64 = [11, 12].iter().map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0)).sum();
    Ok(Duration::from_secs_f64(ticks as f64 / clock_ticks()))
}

/// CPU time of the process's children that it has waited for (`cutime + cstime`): for `beckon
/// serve`, the Codex processes of finished tasks.
pub fn children_cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("while reading /proc/{pid}/stat"))?;
    let rest = stat.rsplit_once(')').map(|(_, r)| r).context("malformed /proc stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // cutime and cstime are fields 16 and 17 of the whole line, 14 and 15 after the name.
    let ticks: u64 = [13, 14].iter().map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0)).sum();
    Ok(Duration::from_secs_f64(ticks as f64 / clock_ticks()))
}

/// `sysconf(_SC_CLK_TCK)`: 100 on every Linux this runs on; `getconf` confirms when present.
fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// Peak resident set size (`VmHWM`) in MiB.
pub fn peak_rss_mib(pid: u32) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("while reading /proc/{pid}/status"))?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmHWM in /proc status")?;
    Ok(kb / 1024.0)
}
