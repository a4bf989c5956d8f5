//! The floor: what one delivery costs with no HTTP, no ledger and no logging, only
//! `verify::github` (HMAC-SHA256, constant-time compare) plus `ingest::github::decode` (JSON parse
//! into the normalized event), in a tight loop over the same payloads the HTTP benchmark sends.
//! A plain timing loop rather than criterion: criterion's build (plotters, rayon, …) would double
//! the benchmark's build time for a figure whose spread is small next to the HTTP path's.

use std::hint::black_box;
use std::time::{Duration, Instant};

use anyhow::Context;
use beckon_core::ingest::github;
use beckon_core::verify;
use secrecy::SecretString;

use crate::payloads::{self, Size};

/// Per size: the body length and the mean time per verify + decode.
pub fn run(budget: Duration) -> anyhow::Result<Vec<(Size, usize, Duration)>> {
    let set = payloads::set(4)?;
    let secrets = vec![SecretString::from(payloads::SECRET.to_owned())];
    let mut out = Vec::new();
    for size in Size::ALL {
        let of_size: Vec<_> = set.iter().filter(|p| p.size == size).collect();
        let mean_len = of_size.iter().map(|p| p.body.len()).sum::<usize>() / of_size.len().max(1);
        // Warm up caches and the allocator, then count iterations within the budget.
        let mut iterations = 0u64;
        let started = Instant::now();
        while started.elapsed() < budget || iterations < 1000 {
            for p in &of_size {
                verify::github(&secrets, &p.body, Some(&p.signature)).context("a bench payload failed verification")?;
                let json = github::payload_bytes(Some("application/json"), &p.body)?;
                let event =
                    github::decode("issue_comment", "floor", &json).context("a bench payload failed to decode")?;
                black_box(event);
                iterations += 1;
            }
        }
        let per = started.elapsed() / u32::try_from(iterations).unwrap_or(u32::MAX);
        out.push((size, mean_len, per));
    }
    Ok(out)
}
