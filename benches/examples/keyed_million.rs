//! Resident memory of a million keyed breakers: builds a
//! `BreakerRegistry<u32>` with tripline's default breaker (a count-100
//! window) and one breaker per key, and prints the growth of the process's
//! resident set per breaker — what the allocator really hands out,
//! headers and alignment included, not just the bytes asked for.
//!
//! `keyed_million [N]` (default 1 000 000) prints one JSON line:
//!
//! ```text
//! {"breakers":1000000,"rss_bytes":...,"bytes_per_breaker":...}
//! ```

use std::process::ExitCode;

use tripline::registry::{BreakerRegistry, RegistryConfig};

/// This process's resident set in bytes (Linux `/proc/self/statm`).
fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

fn main() -> ExitCode {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let registry = match BreakerRegistry::<u32>::try_new(RegistryConfig {
        max_breakers: n as usize,
        ..Default::default()
    }) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("keyed_million: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The first breaker pays for the thread's and the family's setup.
    let _ = registry.get(&0);
    let Some(before) = rss_bytes() else {
        eprintln!("keyed_million: /proc/self/statm is not readable");
        return ExitCode::FAILURE;
    };
    for key in 1..n {
        if let Err(e) = registry.get(&key) {
            eprintln!("keyed_million: key {key}: {e}");
            return ExitCode::FAILURE;
        }
    }
    let after = rss_bytes().unwrap_or(before);
    let grown = after.saturating_sub(before);
    println!(
        "{{\"breakers\":{n},\"rss_bytes\":{grown},\"bytes_per_breaker\":{}}}",
        grown / u64::from(n.max(2) - 1)
    );
    ExitCode::SUCCESS
}
