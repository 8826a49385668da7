//! CPU time of one scrape of a 20 000-breaker registry (the workload of
//! `tripline_benches::scrape`), read from the thread's own scheduler
//! statistics (`/proc/thread-self/schedstat`, Linux): unlike criterion's
//! wall time it does not grow when other processes take the cores, so the
//! figure holds on a busy machine. The kernel updates it at scheduler
//! ticks, so the runner reports the mean over `RUNS` scrapes (default 20)
//! per detail rather than any single one.
//!
//! `cargo run --release -p tripline-benches --example scrape_cpu [RUNS [DETAIL]]`
//! (DETAIL: `essential`, `full` or `aggregate`; all three by default).

use std::hint::black_box;

use tripline_benches::scrape::{BREAKERS, scrape, target};
use tripline_prometheus::Detail;
use tripline_prometheus::http::Format;

/// This thread's CPU time in nanoseconds, if the kernel exposes it.
fn thread_cpu_nanos() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let only = std::env::args().nth(2).unwrap_or_default();
    for detail in [Detail::Essential, Detail::Full, Detail::Aggregate] {
        if !only.is_empty() && !format!("{detail:?}").eq_ignore_ascii_case(&only) {
            continue;
        }
        let (registry, _breakers) = target(detail);
        let runs = runs.max(1);
        let mut bytes = 0;
        let Some(start) = thread_cpu_nanos() else {
            eprintln!("no /proc/thread-self/schedstat: CPU time unavailable");
            return;
        };
        for _ in 0..runs {
            bytes = black_box(scrape(&registry, Format::OpenMetrics));
        }
        let cpu = thread_cpu_nanos().unwrap_or(start) - start;
        println!(
            "{BREAKERS} breakers, {detail:?}: {:.2} MiB of OpenMetrics, {:.2} ms CPU per scrape (mean of {runs})",
            bytes as f64 / (1 << 20) as f64,
            cpu as f64 / 1e6 / runs as f64,
        );
    }
}
