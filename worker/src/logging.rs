//! Logging: one `tracing` subscriber for the process, text or JSON (`BECKON_LOG_FORMAT=json`),
//! filtered by `RUST_LOG` (default `info`). Logs go to stderr so `--json` output stays clean.

use std::io::IsTerminal;

use beckon_core::config::LogFormat;
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber. Called once, from `main`.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        // The current span's fields (the delivery id, the task id) once, as `span`; not the list
        // of every enclosing span as well, which repeated them on each line.
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(true).with_span_list(false).init(),
        LogFormat::Text => builder.init(),
    }
}
